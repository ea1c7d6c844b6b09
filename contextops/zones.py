"""Time zones: one rule for every place a session's environment names one."""

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.utils import timezone

from .errors import Invalid

DEFAULT_ZONE = "UTC"


def zone_check(name: str, *, field: str = "environment.timezone") -> None:
    """422 unless ``name`` is an IANA time zone this server knows; an unknown zone is
    refused, never silently read as UTC."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise Invalid(f"Unknown time zone {name!r}.", field=field) from None


def local_zone(environment: dict[str, Any] | None) -> tuple[str, ZoneInfo]:
    """The zone the environment names, with its name; UTC when it names none, or one this
    server does not know (stored before zones were checked)."""
    name = (environment or {}).get("timezone") or DEFAULT_ZONE
    try:
        return name, ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        return DEFAULT_ZONE, ZoneInfo(DEFAULT_ZONE)


def local_now(environment: dict[str, Any] | None, now: datetime | None = None) -> datetime:
    """``now`` (default: the current time) in the environment's zone (``local_zone``)."""
    return (now or timezone.now()).astimezone(local_zone(environment)[1])
