"""The context priorities and what each is worth: the one home of this vocabulary.

A handle, a conversation turn and a pack candidate each carry one of five levels.
Compaction gives up the cheapest first, packing takes the dearest first, and
``critical`` is never given up. The scores are the tier weights of
docs/concepts.md#priorities.
"""

from django.db import models


class Priority(models.TextChoices):
    CRITICAL = "critical"
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"
    BACKGROUND = "background"


# What each level is worth, most important first.
PRIORITY_SCORES: dict[str, int] = {
    Priority.CRITICAL.value: 100,
    Priority.HIGH.value: 75,
    Priority.MEDIUM.value: 50,
    Priority.LOW.value: 25,
    Priority.BACKGROUND.value: 10,
}
