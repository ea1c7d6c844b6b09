"""Window pressure levels with their hysteresis (docs/concepts.md#pressure).

Utilization is the window occupancy of the latest model call (its full input, cached
tokens included, plus its output) over the session's context window. Going up uses the
plain thresholds; going down needs 5 % below the threshold, and one drop may cross
several levels.
"""

from dataclasses import dataclass

LOW, MEDIUM, HIGH, CRITICAL = "low", "medium", "high", "critical"
LEVELS = (LOW, MEDIUM, HIGH, CRITICAL)
# The levels as a model field's choices (value, label).
CHOICES = [(level, level.title()) for level in LEVELS]
HYSTERESIS = 0.05

# A level is entered at or above its floor (critical strictly above 0.85).
UP_THRESHOLDS = {MEDIUM: 0.50, HIGH: 0.70, CRITICAL: 0.85}
# Leaving a level downwards needs utilization below its floor minus the hysteresis.
DOWN_THRESHOLDS = {level: round(up - HYSTERESIS, 2) for level, up in UP_THRESHOLDS.items()}

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
