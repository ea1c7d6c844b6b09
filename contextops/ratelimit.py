"""Per-key rate limit on writes: a fixed one-minute window counted in the cache.

The cache is Redis in production, so every web process shares one count per key.
"""

import time

from django.conf import settings
from django.core.cache import cache

from .errors import RateLimited

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def rate_limit_check(*, key_id: str) -> None:
    """Count one write for ``key_id``; raises RateLimited once the minute's quota is spent.

    A limit of 0 turns the check off. If the cache is unreachable the write goes
    through: losing the limiter must not take the API down with it.
    """
    limit = settings.CONTEXTOPS_RATE_LIMIT_PER_MINUTE
    if limit <= 0:
        return
    window = int(time.time() // 60)
    cache_key = f"ratelimit:{key_id}:{window}"
    try:
        cache.add(cache_key, 0, timeout=120)
        count = cache.incr(cache_key)
    except Exception:  # noqa: BLE001 - the limiter fails open, see docstring
        return
    if count > limit:
        retry_after = 60 - int(time.time()) % 60
        raise RateLimited(
            f"More than {limit} writes in a minute for this key; retry in {retry_after} s.",
            limit=limit,
            retry_after=retry_after,
        )
