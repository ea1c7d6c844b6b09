"""The supersession rules (docs/concepts.md#supersession) as plain functions, testable
without a database.

A write either starts a chain, supersedes the current fact of its subject (naming the
rule that applied), stays a proposal (a lower authority never supersedes a higher one),
is recorded as outdated (for time-sensitive subjects the later observation wins,
whatever order the writes arrive in), or changes nothing (it states what the current
fact already states: how often something is said never matters).
"""

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

ORGANIZATIONAL_SOURCES = {
    "policy",
    "finance_system",
    "hr_system",
    "legal",
    "document",
    "system",
    "cfo",
    "ceo",
}
CAPABILITY_SOURCES = {"observation", "pattern", "heuristic", "strategy"}

CONSTRAINT_KEYS = {"max", "min", "allowed", "before", "unit"}

CREATE = "create"
SUPERSEDE = "supersede"
PROPOSAL = "proposal"
OUTDATED = "outdated"
FORBIDDEN = "forbidden"
UNCHANGED = "unchanged"
CYCLE = "cycle"


def memory_type_for_source(source: str) -> str:
    """organizational for policy and system sources, capability for learned ones, else user."""
    name = (source or "").strip().lower()
    if name in ORGANIZATIONAL_SOURCES or name.endswith("_system"):
        return "organizational"
    if name in CAPABILITY_SOURCES:
        return "capability"
    return "user"


_VERSION_SUFFIX = re.compile(r"([._-]v\d+)$", re.IGNORECASE)


def subject_for_key(key: str) -> str:
    """The subject a key names when none is given: the key without a ``_v2`` style suffix."""
    return _VERSION_SUFFIX.sub("", key) or key


@dataclass(frozen=True)
class Version:
    """What the rules need to know about one fact."""

    key: str
    value: Any
    authority_rank: int  # 0 is the highest
    observed_at: datetime | None = None
    is_constraint: bool = False
    constraint: dict[str, Any] | None = None
    chain: Any = None  # the chain it belongs to; only the cycle rule of ``decide_write`` reads it
    # When the statement started to hold (valid time): stored versions always have one; a
    # new write has it when the writer gave ``valid_from`` or ``observed_at``, else it
    # holds from the write, after every stored version.
    valid_from: datetime | None = None


def same_statement(new: Version, old: Version) -> bool:
    """True when ``new`` says what ``old`` says: the same value, as a constraint or not alike.

    Facts derived from ``old`` stay right when such a version replaces it.
    """
    return (
        new.value == old.value
        and new.is_constraint == old.is_constraint
        and new.constraint == old.constraint
    )


@dataclass(frozen=True)
class Decision:
    outcome: str  # create | supersede | proposal | outdated | forbidden | unchanged | cycle
    rule: str = ""
    against: Version | None = None
    reason: str = ""
    # For a supersession: the new version says something else, so facts derived from
    # ``against`` need a review (``decide_write`` sets it).
    flag_dependents: bool = False


def decide_explicit(*, new: Version, target: Version) -> Decision:
    """A write that names the fact it supersedes: allowed unless the writer ranks lower."""
    if new.authority_rank > target.authority_rank:
        return Decision(
            FORBIDDEN,
            "authority",
            target,
            f"{target.key} was written with higher authority; a lower authority never supersedes it.",
        )
    return Decision(SUPERSEDE, "explicit", target)


def decide_implicit(
    *,
    new: Version,
    current: Version | None,
    guard: Version | None = None,
    allow_unchanged: bool = True,
) -> Decision:
    """A write on a subject: ``current`` is the subject's current fact in the same scope,
    ``guard`` a constraint governing the subject that a plain statement cannot replace.

    A write stating what ``current`` states is ``unchanged`` (against ``current``) unless
    it adds weight: a higher authority, or a later observation of a time-sensitive
    subject. Then it supersedes like any other write. With ``allow_unchanged`` False (a
    promotion, asked for explicitly) a restatement is decided like any other write.
    """
    if allow_unchanged and current is not None and same_statement(new, current):
        outranks = new.authority_rank < current.authority_rank
        observed_later = bool(
            new.authority_rank <= current.authority_rank
            and new.observed_at
            and current.observed_at
            and new.observed_at > current.observed_at
        )
        if not (outranks or observed_later):
            return Decision(
                UNCHANGED,
                "",
                current,
                f"{current.key} already states this; nothing changed.",
            )
    if guard is not None and new.authority_rank > guard.authority_rank:
        return Decision(
            PROPOSAL,
            "authority",
            guard,
            f"{guard.key} governs this subject with higher authority; the write is kept as a proposal.",
        )
    if current is None:
        return Decision(CREATE)
    if new.authority_rank > current.authority_rank:
        return Decision(
            PROPOSAL,
            "authority",
            current,
            f"{current.key} was written with higher authority; the write is kept as a proposal.",
        )
    if new.observed_at and current.observed_at:
        if new.observed_at < current.observed_at:
            return Decision(
                OUTDATED,
                "temporal",
                current,
                f"{current.key} was observed later ({current.observed_at.isoformat()}); it stays current.",
            )
        return Decision(SUPERSEDE, "temporal", current)
    if new.valid_from and current.valid_from and new.valid_from < current.valid_from:
        # The temporal rule on valid times: a statement that started to hold before the
        # current one did never replaces it (nor splits an older interval).
        return Decision(
            OUTDATED,
            "temporal",
            current,
            f"{current.key} holds from a later time ({current.valid_from.isoformat()}); it stays current.",
        )
    if new.authority_rank < current.authority_rank:
        return Decision(SUPERSEDE, "authority", current)
    return Decision(SUPERSEDE, "implicit", current)


def head_and_guard(
    *, new: Version, current: Sequence[Version]
) -> tuple[Version | None, Version | None]:
    """Of a subject's current facts in one scope (newest first): the one a write of ``new``
    would replace, and the constraint that guards the subject against it.

    A constraint replaces the newest constraint (the newest plain statement when there is
    none) and nothing guards it; a plain statement replaces the newest plain statement and
    is guarded by the newest constraint. Either is None when there is no such fact.
    """
    constraint = next((f for f in current if f.is_constraint), None)
    statement = next((f for f in current if not f.is_constraint), None)
    if new.is_constraint:
        return constraint or statement, None
    return statement, constraint


def decide_write(
    *,
    new: Version,
    named: Version | None = None,
    current: Sequence[Version] = (),
    upstream_chains: Collection[Any] = (),
) -> Decision:
    """The one decision for a write under a new key.

    ``named``: the fact it explicitly supersedes (``decide_explicit``); otherwise
    ``current``: its subject's current facts in its scope, newest first (empty for a
    hypothetical or draft write, which never supersedes), decided by ``decide_implicit``
    against ``head_and_guard``. ``upstream_chains``: the chains of every fact ``new``
    depends on, transitively. ``cycle`` when the write would supersede a chain it depends
    on; a supersession says in ``flag_dependents`` whether it states something else.
    """
    if named is not None:
        decision = decide_explicit(new=new, target=named)
    else:
        head, guard = head_and_guard(new=new, current=current)
        decision = decide_implicit(new=new, current=head, guard=guard)
    target = decision.against
    if decision.outcome != SUPERSEDE or target is None:
        return decision
    if target.chain is not None and target.chain in upstream_chains:
        return Decision(
            CYCLE,
            against=target,
            reason="depends_on would make a cycle: it leads back to the chain this fact supersedes.",
        )
    return Decision(
        SUPERSEDE,
        decision.rule,
        target,
        decision.reason,
        flag_dependents=not same_statement(new, target),
    )


# Constraints ---------------------------------------------------------------------------

_NUMBER = re.compile(r"-?\d+(?:[.,]\d+)?")


def parse_number(value: Any) -> float | None:
    """A number from ``value``: numbers as they are, the first number in a string ("25%")."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        match = _NUMBER.search(value)
        if match:
            return float(match.group(0).replace(",", "."))
    return None


def parse_moment(value: Any) -> date | datetime | None:
    if isinstance(value, datetime | date):
        return value
    if not isinstance(value, str):
        return None
    text = value.strip()
    try:
        if len(text) == 10:
            return date.fromisoformat(text)
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _as_date(moment: date | datetime) -> date:
    return moment.date() if isinstance(moment, datetime) else moment


def constraint_errors(constraint: Any) -> list[str]:
    """Why ``constraint`` is not a machine-checkable constraint value; empty when it is."""
    if not isinstance(constraint, dict) or not constraint:
        return ["A constraint is an object with max, min, allowed or before."]
    errors = []
    unknown = set(constraint) - CONSTRAINT_KEYS
    if unknown:
        errors.append(f"Unknown constraint keys: {', '.join(sorted(unknown))}.")
    if not set(constraint) & {"max", "min", "allowed", "before"}:
        errors.append("A constraint needs one of max, min, allowed or before.")
    for bound in ("max", "min"):
        if bound in constraint and (
            isinstance(constraint[bound], bool) or not isinstance(constraint[bound], int | float)
        ):
            errors.append(f"{bound} must be a number.")
    if "allowed" in constraint and not isinstance(constraint["allowed"], list):
        errors.append("allowed must be a list.")
    if "before" in constraint and parse_moment(constraint["before"]) is None:
        errors.append("before must be an ISO 8601 date or date-time.")
    if "unit" in constraint and not isinstance(constraint["unit"], str):
        errors.append("unit must be a string.")
    return errors


def constraint_violations(constraint: dict[str, Any], value: Any) -> list[str]:
    """Why ``value`` breaks ``constraint`` (one sentence per broken bound); empty if allowed."""
    problems = []
    unit = constraint.get("unit", "")
    if "max" in constraint or "min" in constraint:
        number = parse_number(value)
        if number is None:
            problems.append(
                f"{value!r} is not a number, so it cannot be checked against the bounds."
            )
        else:
            if "max" in constraint and number > constraint["max"]:
                problems.append(
                    f"{_fmt(number)}{unit} is above the maximum of {_fmt(constraint['max'])}{unit}."
                )
            if "min" in constraint and number < constraint["min"]:
                problems.append(
                    f"{_fmt(number)}{unit} is below the minimum of {_fmt(constraint['min'])}{unit}."
                )
    if "allowed" in constraint and value not in constraint["allowed"]:
        problems.append(f"{value!r} is not one of the allowed values {constraint['allowed']!r}.")
    if "before" in constraint:
        limit, moment = parse_moment(constraint["before"]), parse_moment(value)
        if moment is None:
            problems.append(
                f"{value!r} is not a date, so it cannot be checked against the deadline."
            )
        elif limit is not None and not _is_before(moment, limit):
            problems.append(f"{value} is not before {constraint['before']}.")
    return problems


def _is_before(moment: date | datetime, limit: date | datetime) -> bool:
    if isinstance(moment, datetime) and isinstance(limit, datetime):
        if (moment.tzinfo is None) != (limit.tzinfo is None):
            moment, limit = moment.replace(tzinfo=None), limit.replace(tzinfo=None)
        return moment < limit
    return _as_date(moment) < _as_date(limit)


def _fmt(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else str(number)


# Relevance ----------------------------------------------------------------------------

_WORD = re.compile(r"[\w%$.-]+", re.UNICODE)
STOPWORDS = {
    "the",
    "and",
    "for",
    "with",
    "what",
    "which",
    "who",
    "whom",
    "can",
    "could",
    "should",
    "would",
    "will",
    "are",
    "was",
    "were",
    "is",
    "of",
    "to",
    "in",
    "on",
    "at",
    "we",
    "our",
    "you",
    "your",
    "a",
    "an",
    "it",
    "its",
    "do",
    "does",
    "did",
    "be",
    "how",
    "this",
    "that",
    "current",
    "let",
    "lets",
    "us",
    "me",
    "my",
    "any",
    "there",
}


def query_terms(query: str, limit: int = 8) -> list[str]:
    """Distinct lower-case words of ``query`` worth matching (stop words and one-letter words out)."""
    terms: list[str] = []
    for raw in _WORD.findall((query or "").lower()):
        word = raw.strip(".-%$?!,;:")
        if len(word) < 2 or word in STOPWORDS or word in terms:
            continue
        terms.append(word)
        if len(terms) >= limit:
            break
    return terms


def has_cycle(edges: dict[Any, set[Any]], start: set[Any], targets: set[Any]) -> bool:
    """True when following ``edges`` (node -> nodes it depends on) from ``start`` reaches ``targets``."""
    seen: set[Any] = set()
    stack = list(start)
    while stack:
        node = stack.pop()
        if node in targets:
            return True
        if node in seen:
            continue
        seen.add(node)
        stack.extend(edges.get(node, ()))
    return False


_TEXT_BOUND = re.compile(
    r"^\s*(?P<op>max(?:imum)?|at most|no more than|up to|min(?:imum)?|at least|no less than)\s*:?\s*"
    r"(?P<number>-?\d+(?:[.,]\d+)?)\s*(?P<unit>%|[^\W\d_]+)?\s*$",
    re.IGNORECASE,
)
_TEXT_DEADLINE = re.compile(
    r"^\s*(?:before|by|until)\s+(?P<date>\d{4}-\d{2}-\d{2})\s*$", re.IGNORECASE
)


def constraint_from_text(value: Any) -> dict[str, Any] | None:
    """A machine-checkable constraint read from a short text ("max 15%", "before 2026-03-01")."""
    if not isinstance(value, str):
        return None
    match = _TEXT_BOUND.match(value)
    if match:
        op = match.group("op").lower()
        bound = "max" if op.startswith(("max", "at most", "no more", "up to")) else "min"
        number = float(match.group("number").replace(",", "."))
        result: dict[str, Any] = {bound: int(number) if number.is_integer() else number}
        if match.group("unit"):
            result["unit"] = match.group("unit")
        return result
    match = _TEXT_DEADLINE.match(value)
    if match and parse_moment(match.group("date")) is not None:
        return {"before": match.group("date")}
    return None


# The explicit rule (docs/concepts.md#supersession): words with which a user says a new
# fact replaces an old one.
EXPLICIT_KEYWORDS = (
    "new",
    "changed",
    "moved",
    "updated",
    "actually",
    "correction",
    "instead",
    "now",
)
_EXPLICIT = re.compile(r"\b(" + "|".join(EXPLICIT_KEYWORDS) + r")\b", re.IGNORECASE)


def explicit_keywords(utterance: str) -> list[str]:
    """Rule 1's detection: the keywords in the user's words (lower case, in order, once
    each) that say a fact replaces an earlier one ("I moved to 456 Oak Ave")."""
    found: list[str] = []
    for match in _EXPLICIT.finditer(utterance or ""):
        word = match.group(1).lower()
        if word not in found:
            found.append(word)
    return found
