"""Time zones: one rule for every place a session's environment names one."""

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .errors import Invalid


def zone_check(name: str, *, loc: list) -> None:
    """422 unless ``name`` is an IANA time zone this server knows; an unknown zone is
    refused, never silently read as UTC."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise Invalid(f"Unknown time zone {name!r}.", loc=loc) from None
