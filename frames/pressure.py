"""Window pressure levels with the hysteresis of seed 003.

Utilization is the window occupancy of the latest model call (its full input, cached
tokens included, plus its output) over the session's context window. Going up uses the
plain thresholds; going down needs 5 % below the threshold, and one drop may cross
several levels.
"""

from dataclasses import dataclass

from django.db import transaction

LOW, MEDIUM, HIGH, CRITICAL = "low", "medium", "high", "critical"
LEVELS = (LOW, MEDIUM, HIGH, CRITICAL)
HYSTERESIS = 0.05

# A level is entered at or above its floor (critical strictly above 0.85).
UP_THRESHOLDS = {MEDIUM: 0.50, HIGH: 0.70, CRITICAL: 0.85}
# Leaving a level downwards needs utilization below its floor minus the hysteresis.
DOWN_THRESHOLDS = {CRITICAL: 0.80, HIGH: 0.65, MEDIUM: 0.45}

RECOMMENDED_ACTIONS = {
    LOW: ["Verbose format is fine.", "No action needed."],
    MEDIUM: ["Use the dense format.", "Monitor pressure closely."],
    HIGH: [
        "Use the ultra-dense format.",
        "Page out resources you are not using.",
        "Review the eviction candidates.",
    ],
    CRITICAL: [
        "Summarize now (emergency compaction).",
        "Evict resources urgently, starting with the eviction candidates.",
        "Warn the agent: the context window is nearly full.",
    ],
}
COLOURS = {LOW: "ok", MEDIUM: "warn", HIGH: "high", CRITICAL: "crit"}


def level_for(utilization: float) -> str:
    """The level without history: LOW < 50 % <= MEDIUM < 70 % <= HIGH <= 85 % < CRITICAL."""
    if utilization > UP_THRESHOLDS[CRITICAL]:
        return CRITICAL
    if utilization >= UP_THRESHOLDS[HIGH]:
        return HIGH
    if utilization >= UP_THRESHOLDS[MEDIUM]:
        return MEDIUM
    return LOW


def level_next(previous: str, utilization: float) -> str:
    """The level after ``previous`` at ``utilization`` (0..1, may exceed 1).

    Rising returns the plain level at once. Falling steps down one level at a time
    while the utilization is below the current level's down threshold, so a large
    drop crosses several levels in one call; otherwise ``previous`` is kept. An
    unknown ``previous`` is treated as LOW.
    """
    previous = previous if previous in LEVELS else LOW
    plain = level_for(utilization)
    if LEVELS.index(plain) >= LEVELS.index(previous):
        return plain
    level = previous
    while level != LOW and utilization < DOWN_THRESHOLDS[level]:
        level = LEVELS[LEVELS.index(level) - 1]
    return level


def hysteresis_band(level: str) -> tuple[float, float | None]:
    """(stay-above, rise-at) bounds of ``level``: below the first it drops, at the second it rises."""
    down = DOWN_THRESHOLDS.get(level, 0.0)
    index = LEVELS.index(level)
    up = UP_THRESHOLDS[LEVELS[index + 1]] if index + 1 < len(LEVELS) else None
    return down, up


@dataclass(frozen=True)
class Pressure:
    level: str
    utilization: float
    occupancy_tokens: int
    window_tokens: int

    @property
    def recommended_actions(self) -> list[str]:
        return list(RECOMMENDED_ACTIONS[self.level])

    @property
    def percentage(self) -> float:
        return round(self.utilization * 100, 1)

    @property
    def colour(self) -> str:
        return COLOURS[self.level]

    @property
    def band(self) -> tuple[float, float | None]:
        return hysteresis_band(self.level)


def utilization_of(occupancy_tokens: int, window_tokens: int) -> float:
    return occupancy_tokens / window_tokens if window_tokens > 0 else 0.0


def pressure_update(*, session, frame) -> str:
    """Move ``frame``'s pressure level to the next one for its latest occupancy; return it.

    Call it inside the transaction that recorded the usage (the session row locked).
    The level steps from the stored ``Frame.pressure_level`` with hysteresis. When
    ``frame`` is the top of the session's stack, the session's level (the gauge)
    follows it, the session enters ``active_pressure`` at CRITICAL and returns to
    ``active`` below it, and a ``pressure.changed`` event is appended on a change.
    """
    from .events import event_append
    from .models import Frame, Session

    utilization = utilization_of(frame.last_occupancy_tokens, session.context_window_tokens)
    new_level = level_next(frame.pressure_level, utilization)
    if new_level != frame.pressure_level:
        Frame.objects.filter(pk=frame.pk).update(pressure_level=new_level)
        frame.pressure_level = new_level
    top = top_frame(session)
    if top is None or top.pk != frame.pk:
        return new_level
    updates: dict = {}
    if session.pressure_level != new_level:
        updates["pressure_level"] = new_level
    lifecycle = session.lifecycle_state
    if lifecycle in (Session.Lifecycle.ACTIVE, Session.Lifecycle.ACTIVE_PRESSURE):
        wanted = (
            Session.Lifecycle.ACTIVE_PRESSURE if new_level == CRITICAL else Session.Lifecycle.ACTIVE
        )
        if wanted != lifecycle:
            updates["lifecycle_state"] = wanted
    if updates:
        previous = session.pressure_level
        with transaction.atomic():
            Session.objects.filter(pk=session.pk).update(**updates)
            for name, value in updates.items():
                setattr(session, name, value)
            if "pressure_level" in updates:
                event_append(
                    session=session,
                    type="pressure.changed",
                    frame=frame,
                    payload={
                        "from": previous,
                        "to": new_level,
                        "utilization": round(utilization, 4),
                    },
                )
    return new_level


def top_frame(session):
    """The top of the session's stack: its newest active frame, else its newest open one."""
    from .models import Frame

    frames = Frame.objects.filter(session=session).only(
        "id",
        "session_id",
        "last_occupancy_tokens",
        "pressure_level",
        "status",
        "goal",
        "created_at",
    )
    return (
        frames.filter(status=Frame.Status.ACTIVE).order_by("-depth", "-created_at").first()
        or frames.filter(status__in=Frame.OPEN_STATUSES).order_by("-depth", "-created_at").first()
    )


def session_pressure(session) -> Pressure:
    """The pressure the session's gauge shows: that of the frame at the top of its stack."""
    frame = top_frame(session)
    occupancy = frame.last_occupancy_tokens if frame is not None else 0
    utilization = utilization_of(occupancy, session.context_window_tokens)
    level = frame.pressure_level if frame is not None else session.pressure_level
    if level not in LEVELS:
        level = level_next(LOW, utilization)
    return Pressure(level, utilization, occupancy, session.context_window_tokens)
