"""Persistent facts (layer 2) with their supersession chains, and the working set (layer 3).

A chain is every version linked by ``supersedes``; all its versions share ``chain``, so
the valid head of any key and the whole lineage are each one indexed query.
"""

import uuid

from django.db import models
from django.db.models import Q
from django.utils import timezone

from contextops.models import Organization
from contextops.text import keyed_text


class Fact(models.Model):
    class MemoryType(models.TextChoices):
        USER = "user"
        CAPABILITY = "capability"
        ORGANIZATIONAL = "organizational"

    class Scope(models.TextChoices):
        GLOBAL = "global"
        TASK = "task"
        HYPOTHETICAL = "hypothetical"
        DRAFT = "draft"
        SESSION = "session"

    class Status(models.TextChoices):
        ACTIVE = "active"  # valid: the head of its chain
        SUPERSEDED = "superseded"  # replaced by the next version of its chain
        PROPOSAL = "proposal"  # a lower authority's write against a higher one; never current
        OUTDATED = "outdated"  # arrived with an older observation than the current fact
        INVALIDATED = "invalidated"  # withdrawn (the admin's "delete")
        DISCARDED = "discarded"  # a hypothetical or draft fact thrown away

    class Rule(models.TextChoices):
        EXPLICIT = "explicit"
        IMPLICIT = "implicit"
        AUTHORITY = "authority"
        TEMPORAL = "temporal"
        PROMOTION = "promotion"
        ADMIN_EDIT = "admin_edit"

    PRIVATE_SCOPES = (Scope.HYPOTHETICAL, Scope.DRAFT)
    # The versions that held for a while (their valid interval is read); the others never did.
    TIMELINE_STATUSES = (Status.ACTIVE, Status.SUPERSEDED, Status.INVALIDATED)

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="facts")
    key = models.CharField(max_length=200)
    subject = models.CharField(max_length=200, blank=True)
    value = models.JSONField(null=True, blank=True)
    # The value as text (key, subject and value), kept for relevance search.
    search_text = models.TextField(blank=True)
    source = models.CharField(max_length=120, blank=True)
    # The level on the organization's ladder of whoever wrote this version.
    authority = models.CharField(max_length=64, blank=True)
    author = models.CharField(max_length=200, blank=True)
    memory_type = models.CharField(
        max_length=16, choices=MemoryType.choices, default=MemoryType.USER
    )
    scope = models.CharField(max_length=16, choices=Scope.choices, default=Scope.GLOBAL)
    scope_id = models.CharField(max_length=200, blank=True)
    is_valid = models.BooleanField(default=True)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.ACTIVE)
    chain = models.UUIDField(default=uuid.uuid4, editable=False)
    version = models.PositiveIntegerField(default=1)
    # One-to-one: the database itself forbids a fact being superseded twice.
    supersedes = models.OneToOneField(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="superseded_by"
    )
    supersession_rule = models.CharField(max_length=16, choices=Rule.choices, blank=True)
    # For proposals and outdated writes: the fact that stayed current.
    contested = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="contested_by"
    )
    depends_on = models.ManyToManyField(
        "self",
        symmetrical=False,
        through="FactDependency",
        related_name="derived_facts",
        blank=True,
    )
    needs_review = models.BooleanField(default=False)
    is_constraint = models.BooleanField(default=False)
    constraint_type = models.CharField(max_length=40, blank=True)
    constraint = models.JSONField(null=True, blank=True)
    # The lowest level allowed to read this fact into a context; blank: everyone.
    read_authority = models.CharField(max_length=64, blank=True)
    # A permission a session's identity must hold for a context to include this fact.
    read_permission = models.CharField(max_length=100, blank=True, default="")
    tokens = models.PositiveIntegerField(default=0)
    # The vector of "{key}: {value}" (the text a context shows), float16 bytes computed
    # when this version is written (contextops.embeddings); NULL until the backfill when
    # the provider was off or failed.
    embedding = models.BinaryField(null=True, blank=True)
    observed_at = models.DateTimeField(null=True, blank=True)
    # Valid time: when what this version states held in the world (``created_at`` is the
    # record time: when we learned it). ``valid_from`` is the writer's ``valid_from``, else
    # ``observed_at``, else the write time; ``valid_until`` stays open (NULL) while the
    # version is current and is set, once, to the ``valid_from`` of the version that
    # supersedes it (or to the time it was withdrawn). Proposals, outdated and discarded
    # writes never held: their interval is never read.
    valid_from = models.DateTimeField(default=timezone.now)
    valid_until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["organization", "key"], name="fact_unique_key_per_org"),
            models.UniqueConstraint(
                fields=["chain", "version"], name="fact_unique_version_in_chain"
            ),
            models.UniqueConstraint(
                fields=["chain"], condition=Q(is_valid=True), name="fact_one_valid_head_per_chain"
            ),
            models.CheckConstraint(
                condition=Q(is_valid=False) | Q(status="active"), name="fact_valid_means_active"
            ),
            models.CheckConstraint(
                condition=~Q(supersedes=models.F("id")), name="fact_never_supersedes_itself"
            ),
            models.CheckConstraint(
                condition=Q(valid_until__isnull=True) | Q(valid_until__gte=models.F("valid_from")),
                name="fact_valid_interval_ordered",
            ),
        ]
        indexes = [
            models.Index(
                fields=["organization", "subject", "scope", "scope_id", "is_valid"],
                name="fact_subject_current",
            ),
            models.Index(fields=["organization", "is_valid", "scope"], name="fact_valid_scope"),
            models.Index(fields=["organization", "needs_review"], name="fact_needs_review"),
            # Reads as of a valid time: one chain's version then, the organization's facts then.
            models.Index(fields=["chain", "valid_from"], name="fact_chain_valid_from"),
            models.Index(fields=["organization", "valid_from"], name="fact_valid_from"),
            # A context pack's read of the constraints and policy governing its facts'
            # subjects: the few governing facts, not every current one of each subject.
            models.Index(
                fields=["organization", "subject"],
                name="fact_governing_subject",
                condition=Q(is_valid=True)
                & (Q(is_constraint=True) | Q(memory_type="organizational")),
            ),
        ]
        # An organization's admins hold it (create_user --admin): their edits in the admin
        # speak with the top of the ladder, so they can correct the policy itself.
        permissions = [("edit_policy", "Can write facts with the top authority of the ladder")]

    def __str__(self) -> str:
        return self.key

    @property
    def superseded_by_fact(self) -> "Fact | None":
        """The next version of the chain, or None when nothing superseded this one.

        An outdated write (an older observation that arrived late: the temporal rule,
        docs/concepts.md#supersession) is
        superseded by the head it lost to: following it leads to the current value.
        """
        if self.status == Fact.Status.OUTDATED and self.contested_id is not None:
            return self.contested
        try:
            return self.superseded_by
        except Fact.DoesNotExist:
            return None

    @property
    def is_private_scope(self) -> bool:
        return self.scope in self.PRIVATE_SCOPES

    @property
    def embedding_text(self) -> str:
        """The text ``embedding`` is the vector of: ``"{key}: {value}"``, as a context shows it."""
        return keyed_text(self.key, self.value)


class FactDependency(models.Model):
    """``fact`` was derived from ``depends_on``: superseding the latter flags the former."""

    fact = models.ForeignKey(Fact, on_delete=models.CASCADE, related_name="dependency_links")
    depends_on = models.ForeignKey(Fact, on_delete=models.CASCADE, related_name="dependent_links")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["fact", "depends_on"], name="fact_dependency_unique"),
            models.CheckConstraint(
                condition=~Q(fact=models.F("depends_on")), name="fact_dependency_not_self"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.fact_id} depends on {self.depends_on_id}"


class WorkingSetItem(models.Model):
    """Session-local scratch data (layer 3); invisible once ``expires_at`` has passed."""

    session = models.ForeignKey(
        "frames.Session", on_delete=models.CASCADE, related_name="working_set"
    )
    key = models.CharField(max_length=200)
    value = models.JSONField(null=True, blank=True)
    tokens = models.PositiveIntegerField(default=0)
    # The vector of "{key}: {value}", computed at each put (as Fact.embedding).
    embedding = models.BinaryField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True, db_index=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["session", "key"], name="working_set_unique_key_per_session"
            )
        ]

    def __str__(self) -> str:
        return self.key

    @property
    def embedding_text(self) -> str:
        """The text ``embedding`` is the vector of: ``"{key}: {value}"``."""
        return keyed_text(self.key, self.value)

    def is_expired(self, now=None) -> bool:
        """True once the TTL has run out; items without a TTL never expire."""
        return self.expires_at is not None and self.expires_at <= (now or timezone.now())


class SourceAuthority(models.Model):
    """A source an organization names (``finance_system``, ``CFO``) and the ladder level it
    speaks with. A fact citing it never carries more authority than that level, nor more
    than its writer's own."""

    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="source_authorities"
    )
    source = models.CharField(max_length=120)
    level = models.CharField(max_length=64)

    class Meta:
        ordering = ["organization", "source"]
        verbose_name_plural = "source authorities"
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "source"], name="source_authority_unique_per_org"
            )
        ]

    def __str__(self) -> str:
        return f"{self.source} → {self.level}"


class FactConflict(models.Model):
    """A proposed supersession between two current facts of different subjects that seem
    to say different things about one entity (``facts.conflicts``). Never applied by
    itself: a person, or an agent whose authority allows, accepts it (``fact`` supersedes
    ``other``), rejects it, or says the two are not the same thing. A decided pair of
    chains is never proposed again (``chain_low``/``chain_high``, whatever the order)."""

    class Status(models.TextChoices):
        PROPOSED = "proposed"
        ACCEPTED = "accepted"
        REJECTED = "rejected"
        DISTINCT = "distinct"  # "not the same thing"

    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="fact_conflicts"
    )
    # The later write, proposed to supersede ``other``, the current fact it contradicts.
    fact = models.ForeignKey(Fact, on_delete=models.CASCADE, related_name="conflicts_raised")
    other = models.ForeignKey(Fact, on_delete=models.CASCADE, related_name="conflicts_against")
    chain_low = models.UUIDField()
    chain_high = models.UUIDField()
    # The evidence: the cosine of the two stored vectors and the entity words both share.
    similarity = models.FloatField()
    matched_words = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PROPOSED)
    decided_by = models.ForeignKey(
        "auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # Who decided, as text that outlives the user row: a username or "key cops_ab12cd34".
    decided_actor = models.CharField(max_length=200, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "chain_low", "chain_high"],
                name="fact_conflict_pair_once",
            ),
        ]
        indexes = [
            models.Index(
                fields=["organization", "status", "created_at"], name="fact_conflict_queue"
            )
        ]

    def __str__(self) -> str:
        return f"{self.fact_id} vs {self.other_id} ({self.status})"
