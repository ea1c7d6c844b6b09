"""Idempotency keys: any API write may carry ``Idempotency-Key``, and is then done once.

The first request with a key claims it (a row committed before the write runs); the
write runs; its answer, status and body, is stored on the row. A later request with the
same key and the same method, path and body gets that answer again without running
anything; the same key with another request is a 422 ``idempotency_key_reused``. A
duplicate that arrives while the first still runs finds the claim and answers 409
``idempotency_key_in_use`` (retry shortly): the two never both apply. Answers are kept a
day per organization and key (``CONTEXTOPS_IDEMPOTENCY_TTL_SECONDS``). An answer that
says nothing happened (5xx, 429) is not kept: the claim is released so a retry runs.
A claim whose request never finished (its process died) may be taken again after
``CONTEXTOPS_IDEMPOTENCY_CLAIM_SECONDS``.
"""

import hashlib
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
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


def idempotency_claim(
    *, organization_id: int, key: str, method: str, path: str, fingerprint: str
) -> IdempotencyKey | Replay:
    """Claim ``key`` for this request (the row to complete afterwards), or the stored
    answer to replay. Raises IdempotencyKeyReused for another request under the same key
    and Conflict ``idempotency_key_in_use`` while the first request still runs."""
    now = timezone.now()
    with transaction.atomic():
        record = (
            IdempotencyKey.objects.select_for_update()
            .filter(organization_id=organization_id, key=key)
            .first()
        )
        if record is None:
            try:
                with transaction.atomic():
                    return IdempotencyKey.objects.create(
                        organization_id=organization_id,
                        key=key,
                        fingerprint=fingerprint,
                        method=method,
                        path=path,
                        created_at=now,
                        claimed_at=now,
                    )
            except IntegrityError:  # a duplicate claimed it a moment ago: see below
                record = IdempotencyKey.objects.select_for_update().get(
                    organization_id=organization_id, key=key
                )
        if record.created_at < now - _ttl():  # a day old: the key is free again
            record.fingerprint, record.method, record.path = fingerprint, method, path
            record.status, record.content_type, record.body = None, "", b""
            record.created_at = record.claimed_at = now
            record.save()
            return record
        if record.fingerprint != fingerprint:
            raise IdempotencyKeyReused(
                f"{HEADER} {key!r} was sent with {record.method} {record.path} and another "
                "body; send a new key for a new request.",
                first_request=f"{record.method} {record.path}",
            )
        if record.status is None:
            if record.claimed_at < now - _claim_timeout():  # its request never finished
                record.claimed_at = now
                record.save(update_fields=["claimed_at"])
                return record
            raise Conflict(
                "idempotency_key_in_use",
                f"A request with {HEADER} {key!r} is still running; retry shortly to get "
                "its answer.",
                retry_after=1,
            )
        return Replay(
            status=record.status, content_type=record.content_type, body=bytes(record.body)
        )


def idempotency_complete(*, record: IdempotencyKey, status: int, content_type: str, body: bytes):
    """Store the first answer of the request that claimed ``record``."""
    with transaction.atomic():
        IdempotencyKey.objects.filter(pk=record.pk, status__isnull=True).update(
            status=status, content_type=content_type, body=body
        )


def idempotency_release(*, record: IdempotencyKey) -> None:
    """Give the key back: the request changed nothing (5xx, 429), so a retry must run."""
    with transaction.atomic():
        IdempotencyKey.objects.filter(pk=record.pk, status__isnull=True).delete()


def idempotency_purge() -> int:
    """Delete the answers older than the time they are kept; returns how many."""
    with transaction.atomic():
        deleted, _ = IdempotencyKey.objects.filter(created_at__lt=timezone.now() - _ttl()).delete()
    return deleted


def keeps_answer(status: int) -> bool:
    """Whether an answer with ``status`` is stored for replay: everything that reports
    what the request did or why it was refused, not a failure that changed nothing."""
    return status < 500 and status != 429
