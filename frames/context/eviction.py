"""Eviction candidates under the session's policy (docs/concepts.md#eviction).

Attention weight is always the first key (low attention goes first); the policy
breaks ties: ``lru`` (least recently accessed first), ``size_first`` (largest first),
``keep_relational`` (technical resources first, relational ones protected) and
``keep_technical`` (relational resources and daily logs first, technical ones
protected). Only active (loaded or hot) handles can be evicted, and never a
critical one: critical context is always in the pack.
"""

from dataclasses import dataclass
from datetime import datetime

from frames.models import ContextHandle, Frame, Session
from frames.selectors import top_frame

from .resources import ACTIVE_STATES

POLICIES = ("lru", "size_first", "keep_relational", "keep_technical")
RELATIONAL_CATEGORIES = frozenset(
    {
        "soul",
        "user",
        "impressions",
        "relational",
        "relationship",
        "personal",
        "daily_log",
        "daily_logs",
    }
)
TECHNICAL_CATEGORIES = frozenset({"tools", "tool", "config", "code", "technical", "file", "files"})
TECHNICAL_KINDS = frozenset({"tool_call", "tool_result"})


@dataclass(frozen=True)
class Candidate:
    id: str
    kind: str
    category: str
    priority: str
    state: str
    attention_weight: float
    estimated_tokens: int
    last_access_at: datetime


def kind_of(candidate: Candidate) -> str:
    """``relational``, ``technical`` or ``other`` from the handle's category, then its kind."""
    category = (candidate.category or "").strip().lower()
    if category in RELATIONAL_CATEGORIES:
        return "relational"
    if category in TECHNICAL_CATEGORIES or candidate.kind in TECHNICAL_KINDS:
        return "technical"
    return "other"


def policy_key(candidate: Candidate, policy: str) -> tuple[float, ...]:
    lru = (candidate.last_access_at.timestamp(), -candidate.estimated_tokens)
    if policy == "size_first":
        return (-candidate.estimated_tokens, candidate.last_access_at.timestamp())
    if policy == "keep_relational":
        return ({"technical": 0, "other": 1, "relational": 2}[kind_of(candidate)], *lru)
    if policy == "keep_technical":
        return ({"relational": 0, "other": 1, "technical": 2}[kind_of(candidate)], *lru)
    return lru


def eviction_order(candidates: list[Candidate], policy: str) -> list[Candidate]:
    """Evictable candidates, first to evict first: (attention weight, policy key).

    Non-active and critical candidates are left out; an unknown policy sorts as lru.
    """
    policy = policy if policy in POLICIES else "lru"
    evictable = [c for c in candidates if c.state in ACTIVE_STATES and c.priority != "critical"]
    return sorted(evictable, key=lambda c: (c.attention_weight, *policy_key(c, policy), c.id))


def eviction_candidates(
    *, session: Session, frame: Frame | None = None, limit: int = 10
) -> list[Candidate]:
    """The first ``limit`` handles to evict in ``frame`` (else the session's top frame)."""
    frame = frame or top_frame(session)
    if frame is None:
        return []
    rows = (
        ContextHandle.objects.filter(frame_id=frame.pk, state__in=ACTIVE_STATES)
        .exclude(priority="critical")
        .values_list(
            "id",
            "kind",
            "category",
            "priority",
            "state",
            "attention_weight",
            "estimated_tokens",
            "last_access_at",
        )
    )
    candidates = [Candidate(str(r[0]), *r[1:]) for r in rows]
    return eviction_order(candidates, session.eviction_policy)[:limit]
