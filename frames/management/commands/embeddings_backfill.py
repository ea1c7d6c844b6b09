"""Give every handle, fact and working-set item its vector.

Writes embed their own rows; this fills those left without one (written before
embeddings existed, while CONTEXTOPS_EMBEDDINGS was ``none``, or while the provider
failed). ``--all`` embeds every row again, e.g. after a change of provider or model.
Rows are read in batches of ``--batch-size`` in primary-key order, each batch embedded
with one call to the provider and written in one transaction; a row whose text changed
meanwhile (a page-in that loaded a resource, a new working-set value) is left to the
write that changed it. Running it twice does nothing the second time.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.db.models import Model, Q

from contextops.embeddings import (
    EmbeddingError,
    embedding_dim,
    embeddings_enabled,
    vectors_for_storage,
)
from contextops.models import Organization
from facts.models import Fact, WorkingSetItem
from facts.vectors import fact_vectors_sync
from frames.models import ContextHandle


@dataclass(frozen=True)
class Target:
    label: str
    model: type[Model]
    organization_path: str
    # The columns the embedded text is made of (``text`` reads them) and those that say
    # the row's text is still the one read: a row is updated only while they match.
    read: tuple[str, ...]
    unchanged: tuple[str, ...]
    text: Callable[[Any], str]


TARGETS = (
    # A handle's text changes once at most: a page-in loading a cold resource's content.
    Target(
        "handles",
        ContextHandle,
        "session__organization_id",
        ("content", "ref"),
        ("content", "ref"),
        lambda h: h.embedding_text,
    ),
    # A fact version's key and value never change: a new value is a new row.
    Target("facts", Fact, "organization_id", ("key", "value"), (), lambda f: f.embedding_text),
    # A working-set put replaces the value and moves updated_at.
    Target(
        "working-set items",
        WorkingSetItem,
        "session__organization_id",
        ("key", "value", "updated_at"),
        ("updated_at",),
        lambda w: w.embedding_text,
    ),
)


@dataclass
class Counts:
    considered: int = 0
    embedded: int = 0
    failed: int = 0
    changed: int = 0


def backfill(
    target: Target, *, organization_id: int | None, recompute: bool, batch_size: int
) -> Counts:
    """Embed ``target``'s rows without a vector (every row with ``recompute``)."""
    rows = target.model._default_manager.all()
    if organization_id is not None:
        rows = rows.filter(**{target.organization_path: organization_id})
    if not recompute:
        rows = rows.filter(embedding__isnull=True)
    rows = rows.only(*target.read).order_by("pk")
    counts = Counts()
    last: Any = None
    while True:
        batch = list((rows.filter(pk__gt=last) if last is not None else rows)[:batch_size])
        if not batch:
            return counts
        last = batch[-1].pk
        counts.considered += len(batch)
        vectors = vectors_for_storage([target.text(row) for row in batch])
        with transaction.atomic():
            for row, vector in zip(batch, vectors, strict=True):
                if vector is None:
                    counts.failed += 1
                    continue
                unchanged = Q(pk=row.pk, **{f: getattr(row, f) for f in target.unchanged})
                if target.model._default_manager.filter(unchanged).update(embedding=vector):
                    counts.embedded += 1
                else:
                    counts.changed += 1


class Command(BaseCommand):
    help = (
        "Embed the handles, facts and working-set items that have no vector "
        "(--all: every row again, after a change of provider)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--all", action="store_true", help="Embed every row again, not only those without one."
        )
        parser.add_argument("--org", default="", help="Only this organization (name or slug).")
        parser.add_argument("--batch-size", type=int, default=256, help="Rows per provider call.")

    def handle(self, *args: Any, **options: Any) -> None:
        if not embeddings_enabled():
            raise CommandError("Embeddings are off (CONTEXTOPS_EMBEDDINGS=none): nothing to do.")
        if options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1.")
        organization_id = None
        if options["org"]:
            organization = Organization.objects.filter(
                Q(name=options["org"]) | Q(slug=options["org"])
            ).first()
            if organization is None:
                raise CommandError(f"No organization named {options['org']!r}.")
            organization_id = organization.pk
        try:
            dim = embedding_dim()
        except EmbeddingError as exc:
            raise CommandError(str(exc)) from exc
        failed = 0
        for target in TARGETS:
            counts = backfill(
                target,
                organization_id=organization_id,
                recompute=options["all"],
                batch_size=options["batch_size"],
            )
            failed += counts.failed
            self.stdout.write(
                f"{target.label}: {counts.embedded} embedded, {counts.failed} failed, "
                f"{counts.changed} changed meanwhile (of {counts.considered} "
                f"{'rows' if options['all'] else 'without a vector'})"
            )
        if fact_vectors_sync(dim=dim):
            self.stdout.write(f"pgvector: facts searchable by their {dim}-dimension vectors")
        if failed:
            raise CommandError(
                f"{failed} row(s) could not be embedded (see the warnings); run it again later."
            )
