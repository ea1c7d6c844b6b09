"""Per-key rate limits: a fixed one-minute window counted in the cache, one count for
writes and one for reads (higher by default).

The cache is Redis in production, so every web process shares one count per key.
"""

import time

from django.conf import settings
from django.core.cache import cache

from .errors import RateLimited

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def rate_limit_check(*, key_id: str, write: bool = True) -> None:
    """Count one write (or read) for ``key_id``; raises RateLimited once the minute's quota
    (``CONTEXTOPS_RATE_LIMIT_PER_MINUTE``, reads ``CONTEXTOPS_READ_RATE_LIMIT_PER_MINUTE``)
    is spent.

    A limit of 0 turns the check off. If the cache is unreachable the write goes
    through: losing the limiter must not take the API down with it.
    """
    limit = (
        settings.CONTEXTOPS_RATE_LIMIT_PER_MINUTE
        if write
        else settings.CONTEXTOPS_READ_RATE_LIMIT_PER_MINUTE
    )
    if limit <= 0:
        return
    window = int(time.time() // 60)
    cache_key = f"ratelimit:{key_id}:{window}" if write else f"ratelimit:read:{key_id}:{window}"
    try:
        cache.add(cache_key, 0, timeout=120)
        count = cache.incr(cache_key)
    except Exception:  # noqa: BLE001 - the limiter fails open, see docstring
        return
    if count > limit:
        raise _limited(limit, f"{'writes' if write else 'reads'} in a minute for this key")


def _limited(limit: int, what: str) -> RateLimited:
    """429 until the minute's window ends."""
    retry_after = 60 - int(time.time()) % 60
    return RateLimited(
        f"More than {limit} {what}; retry in {retry_after} s.",
        limit=limit,
        retry_after=retry_after,
    )


def _auth_failures_key(address: str) -> str:
    return f"authfail:{address}:{int(time.time() // 60)}"


def auth_failures_check(*, address: str) -> None:
    """Raise RateLimited while ``address`` has failed API authentication
    ``CONTEXTOPS_AUTH_FAILURE_LIMIT_PER_MINUTE`` times this minute: guessing keys costs a
    minute per batch. Like the write limit it fails open when the cache is away."""
    limit = settings.CONTEXTOPS_AUTH_FAILURE_LIMIT_PER_MINUTE
    if limit <= 0:
        return
    try:
        failures = cache.get(_auth_failures_key(address), 0)
    except Exception:  # noqa: BLE001 - the limiter fails open
        return
    if failures >= limit:
        raise _limited(limit, "failed authentications from this address in a minute")


def auth_failure_count(*, address: str) -> None:
    """Count one failed API authentication (an unknown, malformed or revoked key)."""
    if settings.CONTEXTOPS_AUTH_FAILURE_LIMIT_PER_MINUTE <= 0:
        return
    cache_key = _auth_failures_key(address)
    try:
        cache.add(cache_key, 0, timeout=120)
        cache.incr(cache_key)
    except Exception:  # noqa: BLE001 - the limiter fails open
        return
