"""The resource lifecycle (docs/concepts.md#resources) as a pure transition table.

States: ``cold`` (available, not loaded), ``loaded`` (active, normal attention), ``hot``
(active, attention above 1), ``indexed`` (summary cached, full content cold) and
``offline`` (unreachable). Only the transitions below exist; anything else is a 409
``illegal_transition`` and changes nothing.
"""

from dataclasses import dataclass

from contextops.errors import Conflict

COLD, LOADED, HOT, INDEXED, OFFLINE = "cold", "loaded", "hot", "indexed", "offline"
STATES = (COLD, LOADED, HOT, INDEXED, OFFLINE)
ACTIVE_STATES = (LOADED, HOT)
# Attention above this makes an active resource hot; at or below it, loaded.
HOT_ATTENTION = 1.0

# (from, to) -> the trigger for it.
TRANSITIONS: dict[tuple[str, str], str] = {
    (COLD, LOADED): "page_in",
    (LOADED, HOT): "set_attention",
    (HOT, LOADED): "set_attention",
    (LOADED, INDEXED): "page_out",
    (HOT, INDEXED): "page_out",
    (INDEXED, LOADED): "page_in",
    (INDEXED, COLD): "stale",
    (COLD, OFFLINE): "error",
    (LOADED, OFFLINE): "error",
    (HOT, OFFLINE): "error",
    (INDEXED, OFFLINE): "error",
    (OFFLINE, COLD): "recover",
}


@dataclass(frozen=True)
class Transition:
    source: str
    target: str
    trigger: str


def transition_check(source: str, target: str) -> Transition:
    """The transition from ``source`` to ``target``; raises Conflict("illegal_transition")."""
    trigger = TRANSITIONS.get((source, target))
    if trigger is None:
        allowed = sorted(to for (frm, to) in TRANSITIONS if frm == source)
        raise Conflict(
            "illegal_transition",
            f"A {source} resource cannot become {target}; from {source} it can become "
            f"{', '.join(allowed) or 'nothing'}.",
            state=source,
            to=target,
            allowed=allowed,
        )
    return Transition(source, target, trigger)


def targets_from(source: str) -> list[str]:
    """The states a resource in ``source`` may move to, in lifecycle order."""
    return [s for s in STATES if (source, s) in TRANSITIONS]


def state_for_attention(state: str, weight: float) -> str:
    """The state after setting attention ``weight``: only active resources move (hot above 1)."""
    if state not in ACTIVE_STATES:
        return state
    return HOT if weight > HOT_ATTENTION else LOADED


NAME_MAX_CHARS = 80


def resource_name(*, ref: str, content: str, category: str, kind: str) -> str:
    """What a resource is called where it is listed by name only (a cold one in a pack,
    the bootstrap map): its reference, else its content's first line, else its category
    or kind; at most NAME_MAX_CHARS characters."""
    first_line = next((line.strip() for line in (content or "").splitlines() if line.strip()), "")
    name = (ref or "").strip() or first_line or category or kind
    if len(name) > NAME_MAX_CHARS:
        name = name[: NAME_MAX_CHARS - 1].rstrip() + "…"
    return name
