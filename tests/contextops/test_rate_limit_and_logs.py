"""Writes are rate limited per key with a clear 429; keys never reach the logs."""

import logging


def test_it_limits_writes_per_key_and_leaves_reads_and_other_keys_alone(api, make_api, settings):
    settings.CONTEXTOPS_RATE_LIMIT_PER_MINUTE = 3
    other = make_api(agent="other")
    statuses = [api.post("/sessions", {}).status_code for _ in range(4)]
    assert statuses == [201, 201, 201, 429]
    limited = api.post("/sessions", {})
    assert limited.json()["error"] == "rate_limited"
    assert 0 < int(limited["Retry-After"]) <= 60
    assert api.get("/sessions").status_code == 200  # reads are not limited
    assert other.post("/sessions", {}).status_code == 201  # the count is per key


def test_writes_go_through_when_the_counters_redis_is_down(api, settings):
    """The limiter fails open: a Redis outage must not take the write API down with it."""
    settings.CONTEXTOPS_RATE_LIMIT_PER_MINUTE = 3
    settings.CACHES = {  # nothing listens on port 1: every cache call fails at once
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",
        }
    }
    statuses = [api.post("/sessions", {}).status_code for _ in range(5)]
    assert statuses == [201] * 5
    assert api.get("/sessions").json()["count"] == 5


def test_api_keys_never_appear_in_the_logs(api, caplog):
    with caplog.at_level(logging.DEBUG):
        api.post("/sessions", {"identity": {"user_name": "Ada"}})
        api.get("/sessions/not-a-session")
        api.post("/sessions", {"identity": "not an object"})
        api.client.get("/api/v1/sessions", HTTP_AUTHORIZATION="Bearer cops_bogus_secretpart")
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert api.key not in text and api.key.split("_", 2)[2] not in text
    assert "secretpart" not in text
