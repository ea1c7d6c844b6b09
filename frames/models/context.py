"""Stored context-pack assemblies (what went in, what was dropped and why), notes left on
handles, and the resource maps a session leaves for the next one of its agent."""

import uuid
import zlib
from collections.abc import Iterable
from typing import Any

import orjson
import zstandard
from django.db import models
from django.utils import timezone

from contextops.models import Agent, Organization

from .core import ContextHandle, Frame, Session


class CompressedJSONField(models.Field):  # type: ignore[type-arg]
    """A JSON value kept in a binary column, encoded by orjson and compressed by zstd.

    A pack's record lists every item in or out with its score: thousands on a large
    frame. PostgreSQL parsed that JSON into ``jsonb`` for nothing (nothing queries
    inside it) in more time than assembling the pack took; this column takes the bytes
    as they are, a sixth of the size. zstd at level 1 compresses them in a quarter of
    zlib's time, a third smaller. Reads back the Python value; a value written by zlib,
    or as plain JSON text (before this column was binary), reads back too."""

    description = "JSON, compressed"

    def get_internal_type(self) -> str:
        return "BinaryField"

    def get_db_prep_value(self, value: Any, connection: Any, prepared: bool = False) -> Any:
        if value is None:
            return None
        return connection.Database.Binary(zstandard.compress(orjson.dumps(value), 1))

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        return json_decompressed(value)

    def to_python(self, value: Any) -> Any:
        return json_decompressed(value) if isinstance(value, bytes | memoryview) else value

    def value_to_string(self, obj: models.Model) -> str:
        return orjson.dumps(self.value_from_object(obj)).decode()


ZSTD_FRAME = b"\x28\xb5\x2f\xfd"  # how a zstd frame begins


def json_decompressed(value: bytes | memoryview | str | None) -> Any:
    """What ``CompressedJSONField`` stored: a zstd frame or, from before, zlib's stream
    (it begins with 0x78) or the JSON text itself (neither begins any JSON text)."""
    if value is None:
        return None
    data = bytes(value) if isinstance(value, memoryview) else value
    if isinstance(data, bytes):
        if data[:4] == ZSTD_FRAME:
            data = zstandard.decompress(data)
        elif data[:1] == b"x":
            data = zlib.decompress(data)
    return orjson.loads(data)


class ContextPackRecord(models.Model):
    """One assembly of a context pack, kept so the dashboard can say why something is missing.

    ``included`` holds ``{section, id, tokens, form, rank, reason, score, older_than}``
    per item; ``dropped`` is ``{section, id, reason, level, tokens, rank, score,
    older_than}`` per item left out, in the packer's order (a score as a dict of
    ``SCORE_PARTS``). Both are compressed JSON (``CompressedJSONField``): a pack on a frame
    of a thousand handles drops a thousand items, and the answer shows every one. Records
    written before kept the dropped items as runs (consecutive items of one section,
    reason and level as one ``{section, reason, level, ids, tokens, ranks, scores,
    older}``), or as items without scores: they read back as items all the same.
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
    included = CompressedJSONField(default=list)
    dropped_stored = CompressedJSONField(default=list, db_column="dropped")
    query = models.CharField(max_length=2000, blank=True)
    format = models.CharField(
        max_length=12,
        blank=True,
        help_text="verbose, dense or ultra_dense; empty (unknown: the API answers null) for "
        "a pack recorded before formats were kept.",
    )
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
        """The items left out, in order, each ``{section, id, reason, level, tokens, rank,
        score, older_than}``."""
        items = self.__dict__.get("_dropped")
        if items is None:
            items = self.__dict__["_dropped"] = dropped_items(self.dropped_stored)
        return items

    def dropped_keep(self, drops: Iterable[Any]) -> None:
        """Keeps ``drops`` (objects with ``section``, ``id``, ``reason``, ``level``,
        ``tokens``, ``rank``, ``score`` as its parts' list and ``older_than``: what the
        packer drops) as the items ``dropped`` reads back."""
        items = [
            {
                "section": drop.section,
                "id": drop.id,
                "reason": drop.reason,
                "level": drop.level,
                "tokens": drop.tokens,
                "rank": drop.rank,
                "score": dict(zip(SCORE_PARTS, drop.score, strict=True)) if drop.score else None,
                "older_than": drop.older_than,
            }
            for drop in drops
        ]
        self.dropped_stored = items
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


# What an item dropped before packs ranked lacks.
UNRANKED = ("rank", "score", "older_than")


def dropped_items(stored: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The items ``stored``, in order: runs written before items were stored opened up,
    items as they are (written before scores: with ``rank``, ``score`` and
    ``older_than`` null)."""
    items = []
    for run in stored:
        if "ids" not in run:
            items.append(run if "score" in run else {**run, **dict.fromkeys(UNRANKED)})
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
