"""Idempotency keys: any API write may carry ``Idempotency-Key``, and is then done once.

The first request with a key claims it (a row committed before the write runs); the
write runs; its answer, status and body, is stored on the row. A later request with the
same key and the same method, path and body gets that answer again without running
anything; the same key with another request is a 422 ``idempotency_key_reused``. A
duplicate that arrives while the first still runs finds the claim and answers 409
``idempotency_key_in_use`` (retry shortly): the two never both apply. Answers are kept a
day per organization and key (``CONTEXTOPS_IDEMPOTENCY_TTL_SECONDS``). An answer that
says nothing happened (5xx, 429) is not kept: the claim is released so a retry runs.

A claim whose request never finished (the database restarted under it, its process
died) is told from a live one. On PostgreSQL the claiming request holds a session-level
advisory lock on the claim (organization and key) from before the claim until its answer
is stored; a dead request's connection is gone, and its lock with it. A repeat that finds
an unfinished claim tries the lock: free, the claimer is gone and the repeat takes the
claim over and runs the write; held, the claim is live (409). Every path to a claim row
takes the lock first and reads the row under it, so of two repeats only one takes over.
SQLite has no advisory locks: there a claim is taken over once it is older than
``CONTEXTOPS_IDEMPOTENCY_CLAIM_SECONDS``.
"""

import hashlib
import threading
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, cast
from uuid import UUID

from django.conf import settings
from django.db import (
    DEFAULT_DB_ALIAS,
    Error,
    IntegrityError,
    OperationalError,
    connection,
    models,
    transaction,
)
from django.db.backends.signals import connection_created
from django.dispatch import receiver
from django.utils import timezone

from .errors import Conflict, IdempotencyKeyReused, Invalid
from .models import IdempotencyKey

HEADER = "Idempotency-Key"
MAX_KEY_LENGTH = 255


@dataclass(frozen=True)
class Replay:
    """The stored first answer to a request."""

    status: int
    content_type: str
    body: bytes


def idempotency_key_check(raw: str) -> str:
    """The key as sent, when it is 1 to 255 printable ASCII characters; Invalid otherwise."""
    key = raw.strip()
    if not key or len(key) > MAX_KEY_LENGTH or not (key.isascii() and key.isprintable()):
        raise Invalid(
            f"{HEADER} must be 1 to {MAX_KEY_LENGTH} printable ASCII characters "
            "(a UUID is a good choice).",
            field=HEADER,
        )
    return key


def request_fingerprint(*, method: str, path: str, body: bytes) -> str:
    digest = hashlib.sha256()
    for part in (method.upper().encode(), path.encode(), body):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()


def _ttl() -> timedelta:
    return timedelta(seconds=settings.CONTEXTOPS_IDEMPOTENCY_TTL_SECONDS)


def _claim_timeout() -> timedelta:
    return timedelta(seconds=settings.CONTEXTOPS_IDEMPOTENCY_CLAIM_SECONDS)


# --- The claim's advisory lock (PostgreSQL) -------------------------------------------
# The claim this thread's request holds (its lock, row and claim token), so that a new
# connection opened in its middle takes the lock again or refuses to write (below).
_held = threading.local()


def _uses_locks() -> bool:
    return connection.vendor == "postgresql"


def _lock_id(organization_id: int, api_key_id: UUID | str, key: str) -> int:
    """The claim's advisory lock: a signed 64-bit hash of its organization, API key and key."""
    digest = hashlib.sha256(
        f"contextops.idempotency:{organization_id}:{api_key_id}:{key}".encode()
    ).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _try_lock(lock: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [lock])
        return bool(cursor.fetchone()[0])


def _unlock(lock: int) -> None:
    """Release ``lock`` on this thread's connection. A lock that cannot be released must
    not outlive the request on a kept connection (CONN_MAX_AGE): the connection is closed,
    which releases it."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [lock])
    except Error:  # InterfaceError too: a lost connection may say either
        connection.close()


@receiver(connection_created)
def _relock_on_reconnect(sender: object, **kwargs: Any) -> None:
    """A request whose connection was lost (and its lock with it) and that opens another
    takes its claim's lock again, if the claim is still its own; else it may write
    nothing: a repeat took the claim over, and the write is that repeat's."""
    claim, new = getattr(_held, "claim", None), kwargs["connection"]
    if claim is None or new.alias != DEFAULT_DB_ALIAS:
        return
    lock, pk, token = claim
    with new.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [lock])
        if cursor.fetchone()[0]:
            cursor.execute(
                f"SELECT 1 FROM {IdempotencyKey._meta.db_table}"
                " WHERE id = %s AND status IS NULL AND claimed_at = %s",
                [pk, token],
            )
            if cursor.fetchone() is not None:
                return
    _held.claim = None
    new.close()  # the lock, if taken, goes with it
    raise OperationalError("this request's Idempotency-Key claim was taken over")


def idempotency_claim(
    *,
    organization_id: int,
    api_key_id: UUID | str,
    key: str,
    method: str,
    path: str,
    fingerprint: str,
) -> IdempotencyKey | Replay:
    """Claim ``key`` for this request (the row to complete afterwards), or the stored
    answer to replay. Raises IdempotencyKeyReused for another request under the same key
    and Conflict ``idempotency_key_in_use`` while the first request still runs.

    On PostgreSQL a returned claim holds its advisory lock on this thread's connection:
    the caller must call ``idempotency_unlock`` when the request ends, on every path."""
    lock = _lock_id(organization_id, api_key_id, key) if _uses_locks() else None
    # Without the lock (another request holds it), nothing may be claimed or taken over.
    locked = lock is not None and _try_lock(lock)
    try:
        now = timezone.now()
        fresh = IdempotencyKey(
            organization_id=organization_id,
            api_key_id=api_key_id,
            key=key,
            fingerprint=fingerprint,
            method=method,
            path=path,
            created_at=now,
            claimed_at=now,
        )
        # Most keys are new: one insert claims them. A key already there (a repeat, a
        # reuse, a claim to take over) is read under its row lock.
        claimed: IdempotencyKey | Replay
        if (lock is None or locked) and _claim_new(fresh):
            claimed = fresh
        else:
            claimed = _claim(fresh, claimer_gone=locked if lock is not None else None)
    except BaseException:
        if locked and lock is not None:
            _unlock(lock)
        raise
    if locked and lock is not None:
        if isinstance(claimed, Replay):
            _unlock(lock)
        else:  # held until the request ends: idempotency_unlock
            _held.claim = (lock, claimed.pk, claimed.claimed_at)
    return claimed


def idempotency_unlock(*, record: IdempotencyKey) -> None:
    """The end of the request that claimed ``record``: release its lock (PostgreSQL)."""
    claim = getattr(_held, "claim", None)
    _held.claim = None
    if claim is not None and claim[1] == record.pk:
        _unlock(claim[0])


_CLAIM_COLUMNS = (
    "organization_id",
    "api_key_id",
    "key",
    "fingerprint",
    "method",
    "path",
    "status",
    "content_type",
    "body",
    "created_at",
    "claimed_at",
)


def _claim_new(fresh: IdempotencyKey) -> bool:
    """Store ``fresh`` by one insert that does nothing (False) when its API key already
    has its key."""
    meta, qn = IdempotencyKey._meta, connection.ops.quote_name
    fields = [cast("models.Field[Any, Any]", meta.get_field(name)) for name in _CLAIM_COLUMNS]
    sql = (
        f"INSERT INTO {qn(meta.db_table)} ({', '.join(qn(cast(str, field.column)) for field in fields)})"
        f" VALUES ({', '.join(['%s'] * len(fields))})"
        f" ON CONFLICT ({qn('organization_id')}, {qn('api_key_id')}, {qn('key')})"
        f" DO NOTHING RETURNING {qn('id')}"
    )
    params = [field.get_db_prep_save(getattr(fresh, field.attname), connection) for field in fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return False
    fresh.pk = row[0]
    fresh._state.adding, fresh._state.db = False, connection.alias
    return True


def _claim(fresh: IdempotencyKey, *, claimer_gone: bool | None) -> IdempotencyKey | Replay:
    """The claim of ``fresh``'s key under its row lock: ``fresh`` stored, or the stored
    claim, taken over, or its answer. ``claimer_gone``: True, this request holds the
    claim's advisory lock, so no other request holds the claim; False, another does;
    None, no locks (SQLite), a claim's age tells."""
    now, key = fresh.created_at, fresh.key
    in_use = Conflict(
        "idempotency_key_in_use",
        f"A request with {HEADER} {key!r} is still running; retry shortly to get its answer.",
        retry_after=1,
    )
    with transaction.atomic():
        record = (
            IdempotencyKey.objects.select_for_update(no_key=True)
            .filter(organization_id=fresh.organization_id, api_key_id=fresh.api_key_id, key=key)
            .first()
        )
        if record is None and claimer_gone is False:
            raise in_use  # the lock's holder is claiming it this moment
        if record is None:
            try:
                with transaction.atomic():
                    fresh.save(force_insert=True)
                    return fresh
            except IntegrityError:  # a duplicate claimed it a moment ago: see below
                record = IdempotencyKey.objects.select_for_update(no_key=True).get(
                    organization_id=fresh.organization_id, api_key_id=fresh.api_key_id, key=key
                )
        if record.created_at < now - _ttl():  # a day old: the key is free again
            if claimer_gone is False:
                raise in_use
            record.fingerprint, record.method = fresh.fingerprint, fresh.method
            record.path = fresh.path
            record.status, record.content_type, record.body = None, "", b""
            record.created_at = record.claimed_at = now
            record.save()
            return record
        if record.fingerprint != fresh.fingerprint:
            raise IdempotencyKeyReused(
                f"{HEADER} {key!r} was sent with {record.method} {record.path} and another "
                "body; send a new key for a new request.",
                first_request=f"{record.method} {record.path}",
            )
        if record.status is None:
            if claimer_gone is None:
                claimer_gone = record.claimed_at < now - _claim_timeout()
            if not claimer_gone:
                raise in_use
            # Its request never finished: take the claim over. A new claimed_at is the
            # claim's token, so the dead request can no longer complete or release it.
            record.claimed_at = max(now, record.claimed_at + timedelta(microseconds=1))
            record.save(update_fields=["claimed_at"])
            return record
        return Replay(
            status=record.status, content_type=record.content_type, body=bytes(record.body)
        )


def idempotency_complete(
    *, record: IdempotencyKey, status: int, content_type: str, body: bytes
) -> None:
    """Store the first answer of the request that claimed ``record`` (one statement)."""
    IdempotencyKey.objects.filter(
        pk=record.pk, status__isnull=True, claimed_at=record.claimed_at
    ).update(status=status, content_type=content_type, body=body)


def idempotency_release(*, record: IdempotencyKey) -> None:
    """Give the key back: the request changed nothing (5xx, 429), so a retry must run."""
    with transaction.atomic():
        IdempotencyKey.objects.filter(
            pk=record.pk, status__isnull=True, claimed_at=record.claimed_at
        ).delete()


def idempotency_purge() -> int:
    """Delete the answers older than the time they are kept; returns how many."""
    with transaction.atomic():
        deleted, _ = IdempotencyKey.objects.filter(created_at__lt=timezone.now() - _ttl()).delete()
    return deleted


def keeps_answer(status: int) -> bool:
    """Whether an answer with ``status`` is stored for replay: everything that reports
    what the request did or why it was refused, not a failure that changed nothing."""
    return status < 500 and status != 429
