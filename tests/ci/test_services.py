"""The PostgreSQL and Redis pass runs on Redis for the cache too, as production does, and
parallel test processes keep their cache keys apart."""

import os

import pytest
import redis
from django.conf import settings
from django.core.cache import cache

from tests.conftest import IS_REDIS

pytestmark = pytest.mark.skipif(not IS_REDIS, reason="needs Redis (set REDIS_URL)")


def test_the_cache_is_redis_and_this_process_writes_under_its_own_prefix():
    assert settings.CACHES["default"]["BACKEND"] == "django.core.cache.backends.redis.RedisCache"
    worker = os.environ.get("PYTEST_XDIST_WORKER") or "main"
    prefix = settings.CACHES["default"]["KEY_PREFIX"]
    assert prefix.endswith(f"-{worker}")
    cache.set("probe", "here", timeout=30)
    try:
        raw = redis.Redis.from_url(settings.REDIS_URL)
        stored = raw.keys(f"{prefix}:*probe")
        assert len(stored) == 1  # in Redis itself, not in this process's memory
    finally:
        cache.delete("probe")
