"""Tenancy: organizations, the agents that call the API, their keys, and dashboard members."""

import hashlib
import secrets
import uuid

from django.conf import settings
from django.contrib.auth.models import User
from django.db import models
from django.utils import timezone

DEFAULT_AUTHORITY_LADDER = ["policy", "admin", "manager", "employee", "intern", "guest"]


def default_authority_ladder() -> list[str]:
    return list(DEFAULT_AUTHORITY_LADDER)


class Organization(models.Model):
    name = models.CharField(max_length=120, unique=True)
    slug = models.SlugField(max_length=120, unique=True)
    # Highest authority first. Facts written by a level may only supersede facts of the
    # same or a lower level.
    authority_ladder = models.JSONField(default=default_authority_ladder)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def authority_rank(self, level: str) -> int:
        """Rank of ``level`` on this organization's ladder: 0 is the highest.

        An unknown level ranks below every known one, so it can never outrank a
        configured authority.
        """
        ladder = self.authority_ladder or DEFAULT_AUTHORITY_LADDER
        try:
            return ladder.index(level)
        except ValueError:
            return len(ladder)


class Agent(models.Model):
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="agents")
    name = models.CharField(max_length=120)
    authority = models.CharField(max_length=64, default="employee")
    department = models.CharField(max_length=120, blank=True)
    permissions = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["organization", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "name"], name="agent_unique_name_per_org"
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.organization})"


KEY_PREFIX = "cops"


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class ApiKey(models.Model):
    """A bearer key ``cops_<prefix>_<secret>``; only the prefix and a hash are stored.

    A key with a ``user`` is that person's own (``create_api_key --user``): what a person
    may do from a terminal, deciding a suspension, it may do with that user's rights. A
    key without one is an agent's, and never decides for a person.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="keys")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="api_keys",
        help_text="The dashboard user (of the agent's organization) this personal key acts for.",
    )

    class Scope(models.TextChoices):
        FULL = "full", "Full: reads and writes"
        READ_ONLY = "read_only", "Read-only: writes answer 403 read_only_key"

    prefix = models.CharField(max_length=16, unique=True, editable=False)
    hashed_secret = models.CharField(max_length=64, editable=False)
    label = models.CharField(max_length=120, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    scope = models.CharField(
        max_length=16,
        choices=Scope.choices,
        default=Scope.FULL,
        help_text="What the key may do: everything its agent may, or only read.",
    )

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{KEY_PREFIX}_{self.prefix}_… ({self.agent.name})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    @property
    def read_only(self) -> bool:
        return self.scope == self.Scope.READ_ONLY

    @classmethod
    def issue(
        cls,
        *,
        agent: Agent,
        label: str = "",
        user: User | None = None,
        scope: str = "full",
    ) -> tuple["ApiKey", str]:
        """Create a key for ``agent`` (a personal one when ``user`` is given, a read-only
        one with ``scope="read_only"``); returns the row and the full key, shown only once."""
        prefix = secrets.token_hex(4)
        secret = secrets.token_urlsafe(32)
        key = cls.objects.create(
            agent=agent,
            user=user,
            prefix=prefix,
            hashed_secret=hash_secret(secret),
            label=label,
            scope=scope,
        )
        return key, f"{KEY_PREFIX}_{prefix}_{secret}"


class Member(models.Model):
    """A dashboard user's membership: every user belongs to exactly one organization."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="member"
    )
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="members")

    def __str__(self) -> str:
        return f"{self.user} @ {self.organization}"


class IdempotencyKey(models.Model):
    """An ``Idempotency-Key`` an API key sent with a write, and the first answer.

    Claimed (``status`` empty) before the write runs, so a duplicate arriving meanwhile
    waits its turn instead of applying the write again; completed with the answer's status
    and body, which every later request with the same key and body gets back for a day.
    """

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    # The API key that sent it: a record belongs to one key, so another key of the
    # organization sending the same Idempotency-Key makes a request of its own (null: a
    # record from before records had keys; those expire within the day).
    api_key = models.ForeignKey(
        "ApiKey", on_delete=models.CASCADE, related_name="+", null=True, blank=True
    )
    key = models.CharField(max_length=255)
    # SHA-256 of the method, the path with its query string, and the body.
    fingerprint = models.CharField(max_length=64)
    method = models.CharField(max_length=8)
    path = models.TextField()
    status = models.PositiveSmallIntegerField(null=True, blank=True)
    content_type = models.CharField(max_length=120, blank=True)
    body = models.BinaryField(default=b"")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    claimed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "api_key", "key"], name="idempotency_key_unique_per_key"
            )
        ]

    def __str__(self) -> str:
        return f"{self.key} ({self.method} {self.path})"


class AuditEntry(models.Model):
    """One thing a person did: who, when, from where and what. Written in the same
    transaction as the act; never changed or deleted from the dashboard or the admin."""

    class Action(models.TextChoices):
        LOGIN = "login", "Logged in"
        LOGIN_FAILED = "login_failed", "Login failed"
        LOCKED_OUT = "login_locked_out", "Locked out"
        LOGOUT = "logout", "Logged out"
        SUSPENSION_APPROVED = "suspension.approved", "Approved a suspension"
        SUSPENSION_REJECTED = "suspension.rejected", "Rejected a suspension"
        ADMIN_ADDED = "admin.added", "Added in the admin"
        ADMIN_CHANGED = "admin.changed", "Changed in the admin"
        ADMIN_DELETED = "admin.deleted", "Deleted in the admin"
        KEY_ISSUED = "api_key.issued", "Issued an API key"
        KEY_REVOKED = "api_key.revoked", "Revoked an API key"
        SESSION_EXPORTED = "session.exported", "Exported a session"
        SESSION_DELETED = "session.deleted", "Deleted a session"
        STATE_ROLLED_BACK = "rlm_state.rolled_back", "Rolled back an RLM state"
        FACT_REVIEWED = "fact.reviewed", "Marked a fact reviewed"
        COMPACTION_REQUESTED = "compaction.requested", "Started a compaction"
        HANDLE_PAGED_IN = "handle.paged_in", "Paged a handle in"
        HANDLE_PAGED_OUT = "handle.paged_out", "Paged a handle out"

    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    # Who, as text that outlives the user row: a username, "key cops_ab12cd34", "manage.py".
    actor = models.CharField(max_length=200)
    action = models.CharField(max_length=40, choices=Action.choices)
    # From where: the client's address and the request (method and path) that did it.
    address = models.CharField(max_length=64, blank=True)
    via = models.CharField(max_length=300, blank=True)
    # What: the object acted on ("suspension 3f2a…", "facts.fact 12") and the particulars.
    target = models.CharField(max_length=300, blank=True)
    detail = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        verbose_name = "audit entry"
        verbose_name_plural = "audit log"
        indexes = [models.Index(fields=["organization", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.actor} {self.action} {self.target}"
