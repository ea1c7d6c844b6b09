"""Frames and budgets rebuilt from the event log alone (docs/concepts.md#event-log).

The frame table and the session's usage totals are projections of the events. Replaying
a session's events in order (those archived by the retention policy first, read back from
the storage by ``frames.archive.session_events``) gives what the tables should hold; ``projection_diff`` lists
every field where they do not, and ``projections_rebuild`` writes the replayed values.
"""

from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import Sum

from .archive import session_events
from .budget import USAGE_TOTALS, Budget
from .models import Event, Frame, Session, Usage
from .pressure import LEVELS, LOW, level_next, utilization_of

FRAME_FIELDS = (
    "parent_id",
    "depth",
    "status",
    "budget_total",
    "budget_used",
    "budget_reserved",
    "subcall_allocation",
    "max_subframe_depth",
    "children_count",
    "reservations",
    "result_refs",
    "failure_reason",
)
SESSION_FIELDS = (
    "input_tokens_total",
    "output_tokens_total",
    "cache_creation_tokens_total",
    "cache_read_tokens_total",
    "api_calls_total",
)
OPEN = {"active", "waiting", "suspended"}


@dataclass
class Difference:
    session_id: str
    object: str
    field: str
    table: Any
    replayed: Any

    def __str__(self) -> str:
        return f"{self.object}.{self.field}: table has {self.table!r}, events say {self.replayed!r}"


@dataclass
class Replay:
    frames: dict[str, dict[str, Any]] = field(default_factory=dict)
    session: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SESSION_FIELDS, 0))
    # What the replay also learns but the tables do not compare: goals, creation times,
    # each frame's latest occupancy and pressure level, by frame id.
    extra: dict[str, dict[str, Any]] = field(default_factory=dict)
    last_seq: int = 0


def replay(events, *, window_tokens: int | None = None) -> Replay:
    """Apply events in sequence order with the same rules the services apply. With
    ``window_tokens``, also step each frame's pressure level as the services do."""
    state = Replay()
    frames = state.frames
    extra = state.extra
    for event in events:
        payload = event.payload
        frame_id = str(event.frame_id) if event.frame_id else ""  # "": a session-level event
        kind = event.type
        state.last_seq = event.seq
        if kind == "frame.pushed":
            parent_id = payload.get("parent_frame_id")
            inherited = extra.get(parent_id, {}) if parent_id is not None else {}
            extra[frame_id] = {  # a child starts with its parent's window (frame_push)
                "goal": payload.get("goal", ""),
                "created_at": payload.get("created_at", ""),
                "occupancy": inherited.get("occupancy", 0),
                "pressure_level": inherited.get("pressure_level", LOW),
            }
            frames[frame_id] = {
                "parent_id": parent_id,
                "depth": payload["depth"],
                "status": "active",
                "budget_total": payload["budget_total"],
                "budget_used": 0,
                "budget_reserved": 0,
                "subcall_allocation": 0,
                "max_subframe_depth": payload["max_subframe_depth"],
                "children_count": 0,
                "reservations": {},
                "result_refs": [],
                "failure_reason": "",
            }
            if parent_id is not None:
                parent = frames[parent_id]
                parent["subcall_allocation"] += payload["budget_total"]
                parent["children_count"] += 1
                if parent["status"] == "active":
                    parent["status"] = "waiting"
        elif kind == "frame.reserved":
            frame = frames[frame_id]
            frame["budget_reserved"] += payload["amount"]
            frame["reservations"][payload["purpose"]] = (
                frame["reservations"].get(payload["purpose"], 0) + payload["amount"]
            )
        elif kind == "usage.recorded":
            session = state.session
            session["input_tokens_total"] += payload["input_tokens"]
            session["output_tokens_total"] += payload["output_tokens"]
            session["cache_creation_tokens_total"] += payload["cache_creation_input_tokens"]
            session["cache_read_tokens_total"] += payload["cache_read_input_tokens"]
            session["api_calls_total"] += 1
            if frame_id:
                frames[frame_id]["budget_used"] += payload["tokens"]
                if window_tokens and frame_id in extra:
                    figures = extra[frame_id]
                    figures["occupancy"] = payload["tokens"]
                    figures["pressure_level"] = level_next(
                        figures["pressure_level"], utilization_of(payload["tokens"], window_tokens)
                    )
        elif kind == "frame.popped":
            frame = frames[frame_id]
            frame["status"] = payload["status"]
            frame["result_refs"] = [*frame["result_refs"], *payload.get("result_refs", [])]
            frame["failure_reason"] = payload.get("failure_reason", "")
            # A closed frame holds nothing back (migration 0012 released the reservations of
            # frames closed before pops said so in ``released``).
            frame["budget_reserved"], frame["reservations"] = 0, {}
            parent_id = frame["parent_id"]
            if parent_id is not None:
                parent = frames[parent_id]
                settled = Budget(
                    parent["budget_total"],
                    parent["budget_used"],
                    parent["budget_reserved"],
                    parent["subcall_allocation"],
                ).settle_subcall(child_total=frame["budget_total"], child_used=frame["budget_used"])
                parent["budget_used"] = settled.used
                parent["subcall_allocation"] = settled.subcall_allocation
                still_open = any(
                    f["parent_id"] == parent_id and f["status"] in OPEN for f in frames.values()
                )
                if parent["status"] == "waiting" and not still_open:
                    parent["status"] = "active"
        elif kind == "frame.result_added":
            frame = frames[frame_id]
            frame["result_refs"] = [*frame["result_refs"], *payload["result_refs"]]
        elif kind in ("frame.updated", "frame.suspended", "frame.resumed") and frame_id in frames:
            if "status" in payload:
                frames[frame_id]["status"] = payload["status"]
    return state


def _normalize(name: str, value: Any) -> Any:
    if name == "parent_id":
        return str(value) if value is not None else None
    return value


def projection_diff(session: Session) -> list[Difference]:
    """Every field where the tables disagree with a replay of ``session``'s events."""
    state = replay(session_events(session))
    differences: list[Difference] = []
    tables = {
        str(f["id"]): f for f in Frame.objects.filter(session=session).values("id", *FRAME_FIELDS)
    }
    for frame_id in sorted(set(tables) | set(state.frames)):
        table, replayed = tables.get(frame_id), state.frames.get(frame_id)
        if table is None or replayed is None:
            differences.append(
                Difference(
                    str(session.pk),
                    f"frame {frame_id}",
                    "exists",
                    table is not None,
                    replayed is not None,
                )
            )
            continue
        for name in FRAME_FIELDS:
            if _normalize(name, table[name]) != replayed[name]:
                differences.append(
                    Difference(
                        str(session.pk), f"frame {frame_id}", name, table[name], replayed[name]
                    )
                )
    row = Session.objects.filter(pk=session.pk).values(*SESSION_FIELDS).get()
    for name in SESSION_FIELDS:
        if row[name] != state.session[name]:
            differences.append(
                Difference(str(session.pk), "session", name, row[name], state.session[name])
            )
    return differences


def projections_rebuild(session: Session) -> int:
    """Overwrite the session's frames and totals with the replayed values; return rows changed."""
    state = replay(session_events(session))
    changed = 0
    with transaction.atomic():
        Session.objects.select_for_update(no_key=True).filter(pk=session.pk).update(**state.session)
        for frame_id, values in state.frames.items():
            changed += Frame.objects.filter(pk=frame_id, session=session).update(**values)
    return changed


def budget_audit(session: Session) -> list[str]:
    """Budget sums that must hold exactly, checked from the rows themselves.

    For every frame: its subcall allocation is the total of its open children, and its
    used is what its own model calls spent plus what its closed children used.
    """
    frames = {
        f["id"]: f
        for f in Frame.objects.filter(session=session).values(
            "id", "parent_id", "status", "budget_total", "budget_used", "subcall_allocation"
        )
    }
    own = dict(
        Usage.objects.filter(session=session, frame__isnull=False)
        .values("frame_id")
        .annotate(
            spent=Sum("input_tokens")
            + Sum("output_tokens")
            + Sum("cache_creation_input_tokens")
            + Sum("cache_read_input_tokens")
        )
        .values_list("frame_id", "spent")
    )
    allocated: dict = {pk: 0 for pk in frames}
    settled: dict = {pk: 0 for pk in frames}
    for frame in frames.values():
        if frame["parent_id"] is None:
            continue
        if frame["status"] in OPEN:
            allocated[frame["parent_id"]] += frame["budget_total"]
        else:
            settled[frame["parent_id"]] += frame["budget_used"]
    problems = []
    for pk, frame in frames.items():
        if frame["subcall_allocation"] != allocated[pk]:
            problems.append(
                f"frame {pk}: subcall_allocation {frame['subcall_allocation']} != open children's totals {allocated[pk]}"
            )
        expected_used = own.get(pk, 0) + settled[pk]
        if frame["budget_used"] != expected_used:
            problems.append(
                f"frame {pk}: used {frame['budget_used']} != own calls + closed children {expected_used}"
            )
    return problems


@dataclass
class SessionAt:
    """A session as it stood after event ``seq``: its frames (in push order, each with its
    status, budget and pressure level), the top of its stack and its gauge."""

    seq: int
    frames: list[dict[str, Any]]
    top_frame_id: str | None
    pressure_level: str
    utilization: float
    usage_totals: dict[str, int]


def session_at(session: Session, seq: int) -> SessionAt:
    """Rebuild ``session`` from its event log up to and including event ``seq``: frames
    pushed later are absent, budgets and statuses are those of that moment. The top of
    the stack is chosen as ``frames.selectors.top_frame`` chooses it (the deepest, newest
    active frame, else open frame) and the gauge is its pressure."""
    events = Event.objects.filter(session=session, seq__lte=seq).order_by("seq")
    state = replay(events.iterator(chunk_size=2000), window_tokens=session.context_window_tokens)
    frames = []
    for frame_id, row in state.frames.items():
        figures = state.extra.get(frame_id, {})
        budget = Budget(
            row["budget_total"],
            row["budget_used"],
            row["budget_reserved"],
            row["subcall_allocation"],
        )
        frames.append(
            {
                "id": frame_id,
                "parent_frame_id": row["parent_id"],
                "depth": row["depth"],
                "goal": figures.get("goal", ""),
                "status": row["status"],
                "failure_reason": row["failure_reason"] or None,
                "children_count": row["children_count"],
                "budget": {
                    "total": budget.total,
                    "used": budget.used,
                    "reserved": budget.reserved,
                    "subcall_allocation": budget.subcall_allocation,
                    "available": budget.available,
                    "overrun": budget.overrun,
                },
                "pressure_level": figures.get("pressure_level", LOW),
                "occupancy_tokens": figures.get("occupancy", 0),
                "created_at": figures.get("created_at", ""),
            }
        )
    order = {frame["id"]: index for index, frame in enumerate(frames)}

    def stack_key(frame: dict[str, Any]) -> tuple:
        return (frame["depth"], order[frame["id"]])

    active = [f for f in frames if f["status"] == "active"]
    open_ = [f for f in frames if f["status"] in OPEN]
    top = max(active, key=stack_key) if active else (max(open_, key=stack_key) if open_ else None)
    level = top["pressure_level"] if top else LOW
    occupancy = top["occupancy_tokens"] if top else 0
    return SessionAt(
        seq=seq,
        frames=frames,
        top_frame_id=top["id"] if top else None,
        pressure_level=level if level in LEVELS else LOW,
        utilization=round(utilization_of(occupancy, session.context_window_tokens), 4),
        usage_totals={name: state.session[total] for name, total in USAGE_TOTALS.items()},
    )
