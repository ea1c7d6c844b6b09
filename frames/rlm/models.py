"""RLM state: named variables, their mutation log and checkpoints (docs/concepts.md#rlm-state).

A state belongs to one organization and is grouped by session (a ``frames.Session``, or
an external session id kept from an import) and by task tree (``tree-`` + 8 hex; a tree
is a root frame and its descendants). Values larger than the seed's inline limit live in
files of Django's default storage; ``value`` then holds null and ``file_name`` the file.
"""

from django.db import models
from django.db.models import Q
from django.utils import timezone

from contextops.models import Organization
from frames.models import Frame, Session


class VariableType(models.TextChoices):
    TEXT = "text"
    NUMBER = "number"
    BOOLEAN = "boolean"
    NULL = "null"
    JSON = "json"
    ARRAY = "array"
    FILE_PATH = "file_path"
    FILE_CONTENT = "file_content"


class Scope(models.TextChoices):
    """Which other states of the organization see a variable their own state does not define.

    ``global``: every state; ``session``: the states of the same session; ``tree``: the
    states of the same task tree; ``temporary``: none, and it expires after its TTL.
    The order a read looks in is ``selectors.variable_resolve``'s.
    """

    GLOBAL = "global"
    SESSION = "session"
    TREE = "tree"
    TEMPORARY = "temporary"


class RlmState(models.Model):
    class Completion(models.TextChoices):
        INCOMPLETE = "incomplete"
        COMPLETE = "complete"
        ERROR = "error"
        CANCELLED = "cancelled"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    state_id = models.CharField(max_length=14)
    version = models.CharField(max_length=32, default="1.0.0")
    session = models.ForeignKey(
        Session, on_delete=models.SET_NULL, null=True, blank=True, related_name="rlm_states"
    )
    # A session id from an imported document that names no session of this organization.
    session_ref = models.CharField(max_length=200, blank=True)
    tree_id = models.CharField(max_length=13, blank=True, db_index=True)
    root_frame = models.ForeignKey(
        Frame, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    frame = models.ForeignKey(
        Frame, on_delete=models.SET_NULL, null=True, blank=True, related_name="rlm_states"
    )
    completion_status = models.CharField(
        max_length=12, choices=Completion.choices, default=Completion.INCOMPLETE
    )
    completed_at = models.DateTimeField(null=True, blank=True)
    tree_completed_at = models.DateTimeField(null=True, blank=True)
    execution_config = models.JSONField(default=dict, blank=True)
    # Every mutation ever logged, folded ones included; also the source of ``mut-`` ids.
    mutation_total = models.BigIntegerField(default=0)
    # Entries in the mutation log now (at most the seed's max_history_entries).
    history_length = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "state_id"], name="rlm_state_unique_id"
            ),
        ]
        indexes = [
            models.Index(fields=["organization", "-created_at"], name="rlm_state_org_recent"),
            models.Index(fields=["organization", "session"], name="rlm_state_org_session"),
        ]
        permissions = [("rollback_state", "Can roll an RLM state back to a checkpoint")]

    def __str__(self) -> str:
        return self.state_id

    @property
    def is_complete(self) -> bool:
        return self.completion_status == self.Completion.COMPLETE

    @property
    def session_label(self) -> str:
        """The session id as exported: the linked session's UUID, else the imported id, else ''."""
        return str(self.session_id) if self.session_id else self.session_ref


class RlmVariable(models.Model):
    state = models.ForeignKey(RlmState, on_delete=models.CASCADE, related_name="variables")
    name = models.CharField(max_length=128)
    type = models.CharField(max_length=12, choices=VariableType.choices)
    # The value itself when inline; null when it lives in ``file_name``.
    value = models.JSONField(null=True, blank=True, default=None)
    file_name = models.CharField(max_length=500, blank=True)
    size_bytes = models.PositiveIntegerField(default=0)
    description = models.TextField(blank=True)
    source = models.CharField(max_length=200, blank=True)
    read_only = models.BooleanField(default=False)
    scope = models.CharField(max_length=10, choices=Scope.choices, default=Scope.SESSION)
    ttl_seconds = models.PositiveIntegerField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    access_count = models.PositiveBigIntegerField(default=0)
    # Metadata keys of an imported variable that the seed does not define, kept as given.
    extra_metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["state", "name"], name="rlm_variable_unique_name"),
        ]
        indexes = [
            # A read of a name its state does not define looks for it in other states.
            models.Index(fields=["name", "scope"], name="rlm_variable_shared"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def in_file(self) -> bool:
        return bool(self.file_name)

    def is_expired(self, now=None) -> bool:
        """True for a temporary variable whose TTL has run out; never for the others."""
        return self.expires_at is not None and self.expires_at <= (now or timezone.now())


class RlmMutation(models.Model):
    class Operation(models.TextChoices):
        CREATE = "create"
        UPDATE = "update"
        DELETE = "delete"
        RENAME = "rename"
        # Not in the seed's enum: exported as "update" of "*" with reason "rollback to ...".
        ROLLBACK = "rollback"

    state = models.ForeignKey(RlmState, on_delete=models.CASCADE, related_name="mutations")
    seq = models.BigIntegerField()
    mutation_id = models.CharField(max_length=12)
    operation = models.CharField(max_length=10, choices=Operation.choices)
    variable_name = models.CharField(max_length=128)
    old_value = models.JSONField(null=True, blank=True, default=None)
    old_file = models.CharField(max_length=500, blank=True)
    new_value = models.JSONField(null=True, blank=True, default=None)
    new_file = models.CharField(max_length=500, blank=True)
    source = models.CharField(max_length=200, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    timestamp = models.DateTimeField(default=timezone.now)
    # Each variable this mutation changed, by name, as its row was just before (a
    # snapshot row; null when it did not exist yet): what a rollback to an earlier
    # position undoes it with. Null for a mutation that came in with an import.
    before = models.JSONField(null=True, blank=True, default=None)

    class Meta:
        ordering = ["seq"]
        constraints = [
            models.UniqueConstraint(fields=["state", "seq"], name="rlm_mutation_unique_seq"),
            models.UniqueConstraint(fields=["state", "mutation_id"], name="rlm_mutation_unique_id"),
        ]

    def __str__(self) -> str:
        return self.mutation_id


class RlmCheckpoint(models.Model):
    class Kind(models.TextChoices):
        INITIAL = "initial"
        MANUAL = "manual"
        # The oldest mutations folded out of a full log, kept here with a snapshot (a fold
        # that came in with an import has one only if the document carried it).
        HISTORY_FOLD = "history_fold"
        # Came in with an imported document without a snapshot: listed, not restorable.
        IMPORTED = "imported"

    state = models.ForeignKey(RlmState, on_delete=models.CASCADE, related_name="checkpoints")
    checkpoint_id = models.CharField(max_length=13)
    original_checkpoint_id = models.CharField(max_length=200, blank=True)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    kind = models.CharField(max_length=14, choices=Kind.choices, default=Kind.MANUAL)
    # Full state at this point: {"completion_status", "completed_at", "variables": [...]}.
    snapshot = models.JSONField(null=True, blank=True)
    # A checkpoint that is a position in the mutation log (``mutation_seq``) keeps only
    # what the log does not: {"completion_status", "completed_at", "access_counts":
    # {name: count, the non-zero ones}}. Its variables are the current ones with every
    # later mutation undone (``snapshots.checkpoint_snapshots``); a snapshot is stored
    # only once the log folds past it.
    position = models.JSONField(null=True, blank=True, default=None)
    mutation_seq = models.BigIntegerField(default=0)
    folded_mutations = models.JSONField(default=list, blank=True)
    timestamp = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["timestamp", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["state", "checkpoint_id"], name="rlm_checkpoint_unique_id"
            ),
            models.CheckConstraint(
                condition=Q(checkpoint_id__startswith="ckpt-"), name="rlm_checkpoint_id_prefix"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.checkpoint_id} {self.name}"

    @property
    def restorable(self) -> bool:
        return self.snapshot is not None or self.position is not None
