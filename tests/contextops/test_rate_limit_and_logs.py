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
    assert api.get("/sessions").status_code == 200  # reads are counted apart
    assert other.post("/sessions", {}).status_code == 201  # the count is per key


def test_reads_have_a_per_key_limit_of_their_own_higher_than_writes(api, make_api, settings):
    from contextops import settings as production

    assert production.CONTEXTOPS_READ_RATE_LIMIT_PER_MINUTE > (
        production.CONTEXTOPS_RATE_LIMIT_PER_MINUTE
    )
    settings.CONTEXTOPS_RATE_LIMIT_PER_MINUTE = 2
    settings.CONTEXTOPS_READ_RATE_LIMIT_PER_MINUTE = 4
    other = make_api(agent="other", org="Globex")
    statuses = [api.get("/sessions").status_code for _ in range(5)]
    assert statuses == [200, 200, 200, 200, 429]
    limited = api.get("/sessions")
    assert limited.json()["error"] == "rate_limited" and "reads" in limited.json()["detail"]
    assert 0 < int(limited["Retry-After"]) <= 60
    assert api.post("/sessions", {}).status_code == 201  # writes are counted apart
    assert other.get("/sessions").status_code == 200  # the count is per key


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


def test_failed_api_authentication_is_throttled_per_address(api, settings):
    """Guessing keys: past CONTEXTOPS_AUTH_FAILURE_LIMIT_PER_MINUTE failures in a minute
    an address gets 429 with Retry-After, even for a right key; other addresses do not."""
    import time_machine

    settings.CONTEXTOPS_AUTH_FAILURE_LIMIT_PER_MINUTE = 5
    with time_machine.travel("2026-11-28 12:00:10", tick=False):
        guesses = [
            api.client.get(
                "/api/v1/sessions",
                HTTP_AUTHORIZATION=f"Bearer cops_guess{n}_secret",
                REMOTE_ADDR="203.0.113.9",
            )
            for n in range(7)
        ]
        assert [g.status_code for g in guesses] == [401] * 5 + [429] * 2
        assert guesses[-1].json()["error"] == "rate_limited"
        assert int(guesses[-1]["Retry-After"]) == 50
        right = api.client.get(
            "/api/v1/sessions",
            HTTP_AUTHORIZATION=f"Bearer {api.key}",
            REMOTE_ADDR="203.0.113.9",
        )
        assert right.status_code == 429
        elsewhere = api.client.get(
            "/api/v1/sessions", HTTP_AUTHORIZATION=f"Bearer {api.key}", REMOTE_ADDR="192.0.2.1"
        )
        assert elsewhere.status_code == 200
    with time_machine.travel("2026-11-28 12:01:05", tick=False):  # the next minute
        again = api.client.get(
            "/api/v1/sessions", HTTP_AUTHORIZATION=f"Bearer {api.key}", REMOTE_ADDR="203.0.113.9"
        )
        assert again.status_code == 200


def test_the_minutes_last_allowed_write_passes_and_the_next_minute_counts_anew(settings):
    """The quota is exact: the limit-th write of a minute passes, one more is refused until
    the minute ends (no database: the count lives in the cache)."""
    from datetime import UTC, datetime
    from uuid import uuid4

    import pytest
    import time_machine

    from contextops.errors import RateLimited
    from contextops.ratelimit import rate_limit_check

    settings.CONTEXTOPS_RATE_LIMIT_PER_MINUTE = 3
    key = uuid4().hex
    with time_machine.travel(datetime(2026, 11, 28, 12, 0, 0, tzinfo=UTC), tick=False) as clock:
        for _ in range(3):
            rate_limit_check(key_id=key)
        with pytest.raises(RateLimited) as refused:
            rate_limit_check(key_id=key)
        assert refused.value.extra["retry_after"] == 60  # the whole minute is left
        clock.move_to(datetime(2026, 11, 28, 12, 0, 59, 999_000, tzinfo=UTC))
        with pytest.raises(RateLimited) as refused:
            rate_limit_check(key_id=key)
        assert refused.value.extra["retry_after"] == 1
        clock.move_to(datetime(2026, 11, 28, 12, 1, 0, tzinfo=UTC))
        for _ in range(3):
            rate_limit_check(key_id=key)
        with pytest.raises(RateLimited):
            rate_limit_check(key_id=key)
