"""Stored context-pack assemblies (what went in, what was dropped and why), notes left on
handles, and the resource maps a session leaves for the next one of its agent."""

import uuid
from collections.abc import Iterable
from typing import Any

import orjson
from django.db import models
from django.utils import timezone
from psycopg.types.json import Jsonb

from contextops.models import Agent, Organization

from .core import ContextHandle, Frame, Session


def _orjson_text(value: Any) -> str:
    return orjson.dumps(value).decode()


class PackJSONField(models.JSONField):
    """A JSONField that PostgreSQL receives encoded by orjson: a pack's record lists
    every item in or out with its score, thousands on a large frame, and the standard
    encoder took longer than assembling them. Reads and other databases as JSONField."""

    def get_db_prep_value(self, value: Any, connection: Any, prepared: bool = False) -> Any:
        if connection.vendor == "postgresql" and isinstance(value, list | dict):
            return Jsonb(value, dumps=_orjson_text)
        return super().get_db_prep_value(value, connection, prepared)


class ContextPackRecord(models.Model):
    """One assembly of a context pack, kept so the dashboard can say why something is missing.

    ``included`` holds ``{section, id, tokens, form, rank, reason, score, older_than}``
    per item; ``dropped`` is ``{section, id, reason, level, tokens, rank, score,
    older_than}`` per item left out, stored as runs (``dropped_runs``): consecutive items
    of one section, reason and level as one ``{section, reason, level, ids, tokens,
    ranks, scores, older}`` (a score as its parts' list in ``SCORE_PARTS`` order,
    ``older`` only for the items that are an older near-duplicate). A pack on a frame of a thousand handles
    drops a thousand items for the same reason: their runs are a third of the JSON to
    write, and the list reads back in its order. Records written before runs hold the
    items themselves, read back as they are.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="context_packs")
    frame = models.ForeignKey(
        Frame, on_delete=models.SET_NULL, null=True, blank=True, related_name="context_packs"
    )
    budget = models.PositiveIntegerField()
    used = models.PositiveIntegerField()
    level = models.CharField(max_length=12)
    min_compaction = models.CharField(max_length=12, default="none")
    breakdown = models.JSONField(default=dict)
    included = PackJSONField(default=list)
    dropped_runs = PackJSONField(default=list, db_column="dropped")
    query = models.CharField(max_length=2000, blank=True)
    as_of_seq = models.PositiveBigIntegerField(
        null=True,
        blank=True,
        help_text="A replay: assembled as the session stood after this event.",
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["session", "-created_at"], name="context_pack_recent")]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(used__lte=models.F("budget")),
                name="context_pack_used_within_budget",
            ),
        ]

    def __str__(self) -> str:
        return f"pack {self.used}/{self.budget} at {self.level}"

    @property
    def dropped(self) -> list[dict[str, Any]]:
        """The items left out, in order, each ``{section, id, reason, level, tokens}``."""
        items = self.__dict__.get("_dropped")
        if items is None:
            items = self.__dict__["_dropped"] = dropped_items(self.dropped_runs)
        return items

    def dropped_keep(self, drops: Iterable[Any]) -> None:
        """Keeps ``drops`` (objects with ``section``, ``id``, ``reason``, ``level``,
        ``tokens``, ``rank``, ``score`` as its parts' list and ``older_than``: what the
        packer drops) as runs, and their items as ``dropped`` reads them back, both in one
        pass: a large pack drops a thousand items, and an answer shows every one."""
        runs: list[dict[str, Any]] = []
        items: list[dict[str, Any]] = []
        last: tuple[str, str, str] | None = None
        ids: list[Any] = []
        tokens: list[Any] = []
        ranks: list[Any] = []
        scores: list[Any] = []
        run: dict[str, Any] = {}
        for drop in drops:
            section, reason, level, score = drop.section, drop.reason, drop.level, drop.score
            if (section, reason, level) != last:
                last = (section, reason, level)
                ids, tokens, ranks, scores = [], [], [], []
                run = {"section": section, "reason": reason, "level": level, "ids": ids}
                run.update(tokens=tokens, ranks=ranks, scores=scores)
                runs.append(run)
            ids.append(drop.id)
            tokens.append(drop.tokens)
            ranks.append(drop.rank)
            scores.append(score or None)
            if drop.older_than:
                run.setdefault("older", {})[str(len(ids) - 1)] = drop.older_than
            items.append(
                {
                    "section": section,
                    "id": drop.id,
                    "reason": reason,
                    "level": level,
                    "tokens": drop.tokens,
                    "rank": drop.rank,
                    "score": dict(zip(SCORE_PARTS, score, strict=True)) if score else None,
                    "older_than": drop.older_than,
                }
            )
        self.dropped_runs = runs
        self.__dict__["_dropped"] = items

    @property
    def dropped_by_level(self) -> dict[str, list[dict]]:
        """Dropped items grouped by the level that dropped them, in level order."""
        order = ["none", "light", "moderate", "aggressive", "critical"]
        grouped: dict[str, list[dict]] = {}
        for entry in sorted(
            self.dropped,
            key=lambda d: order.index(d.get("level", "none")) if d.get("level") in order else 0,
        ):
            grouped.setdefault(entry.get("level", "none"), []).append(entry)
        return grouped


# A score's parts in the order runs store them (frames.context.ranking.Score.as_dict).
SCORE_PARTS = (
    "total",
    "priority",
    "lexical",
    "semantic",
    "recency",
    "attention",
    "neighbour",
    "older",
)


def dropped_items(stored: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The items of ``stored`` runs, in order (a record written before runs: as it is)."""
    items = []
    for run in stored:
        if "ids" not in run:
            items.append(run)
            continue
        section, reason, level = run["section"], run["reason"], run["level"]
        count = len(run["ids"])
        ranks = run.get("ranks") or [None] * count
        scores = run.get("scores") or [None] * count
        older = run.get("older") or {}
        for index, (item_id, tokens) in enumerate(zip(run["ids"], run["tokens"], strict=True)):
            score = scores[index]
            items.append(
                {
                    "section": section,
                    "id": item_id,
                    "reason": reason,
                    "level": level,
                    "tokens": tokens,
                    "rank": ranks[index],
                    "score": dict(zip(SCORE_PARTS, score, strict=True)) if score else None,
                    "older_than": older.get(str(index)),
                }
            )
    return items


class HandleAnnotation(models.Model):
    """A note an agent or a person left on a handle (docs/concepts.md#resources)."""

    handle = models.ForeignKey(ContextHandle, on_delete=models.CASCADE, related_name="annotations")
    note = models.TextField()
    actor = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["handle", "created_at"], name="annotation_handle_order")]

    def __str__(self) -> str:
        return self.note[:60]


class ResourceMap(models.Model):
    """The map of a session's resources, saved when it persists or ends
    (docs/concepts.md#session-lifecycle) and offered to the next session of the same agent while it loads.

    ``resources`` holds ``{handle_id, name, kind, priority, state, tokens, ref, summary,
    notes}`` per resource, most attended first; ``text`` is its ultra-dense rendering.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey(
        Agent, on_delete=models.CASCADE, null=True, blank=True, related_name="resource_maps"
    )
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="resource_maps")
    resources = models.JSONField(default=list)
    text = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(
                fields=["organization", "agent", "-created_at"], name="resource_map_recent"
            )
        ]

    def __str__(self) -> str:
        return f"map of {len(self.resources)} resources"
