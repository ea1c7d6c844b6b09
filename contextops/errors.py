"""Domain errors. Services raise them; the API maps each to its documented JSON body once."""

from collections.abc import Sequence
from typing import Any


class DomainError(Exception):
    status = 400
    code = "bad_request"
    default_detail = "The request could not be processed."

    def __init__(self, detail: str | None = None, **extra: Any) -> None:
        self.detail = detail or self.default_detail
        self.extra = extra
        super().__init__(self.detail)

    def as_body(self) -> dict[str, Any]:
        return {"error": self.code, "detail": self.detail, **self.extra}


class Unauthenticated(DomainError):
    status, code, default_detail = 401, "unauthenticated", "A valid API key is required."


class PermissionDenied(DomainError):
    status, code, default_detail = 403, "permission_denied", "You may not do this."


class ReadOnlyKey(DomainError):
    status, code, default_detail = (
        403,
        "read_only_key",
        "This API key is read-only: it may read but not change anything.",
    )


class AuthorityTooLow(DomainError):
    status, code, default_detail = 403, "authority_too_low", "Your authority is too low for this."


class NotFound(DomainError):
    status, code, default_detail = 404, "not_found", "Not found."


class Conflict(DomainError):
    status, code = 409, "conflict"

    def __init__(self, code: str, detail: str, **extra: Any) -> None:
        self.code = code
        super().__init__(detail, **extra)


class InsufficientTokens(DomainError):
    status, code = 409, "insufficient_tokens"

    def __init__(self, *, requested: int, available: int, detail: str | None = None) -> None:
        super().__init__(
            detail or f"Requested {requested} tokens but only {available} are available.",
            requested=requested,
            available=available,
        )


class Gone(DomainError):
    status = 410

    def __init__(self, code: str, detail: str, **extra: Any) -> None:
        self.code = code
        super().__init__(detail, **extra)


class TooLarge(DomainError):
    status, code = 413, "too_large"


class Invalid(DomainError):
    """422 with a code of its own (``budget_too_small``) or a field error (``validation_error``).

    ``field`` names the input the error is about, as a dotted path or a sequence of names
    and indexes (``"budget.total"``, ``("messages", 3, "role")``): the service's own words
    for its input, never where an HTTP request carried it. The API layer adds that.
    """

    status = 422

    def __init__(
        self,
        detail: str,
        *,
        code: str = "validation_error",
        field: str | Sequence[str | int] | None = None,
        **extra: Any,
    ) -> None:
        self.code = code
        self.field: tuple[str | int, ...] = field_path(field)
        super().__init__(detail, **extra)

    def as_body(self) -> dict[str, Any]:
        """The error without an HTTP location: ``errors[].loc`` is the field path alone."""
        return self.body_at(())

    def body_at(self, where: tuple[str, ...]) -> dict[str, Any]:
        """The documented body, each field error located under ``where`` (``("body",)``)."""
        body = super().as_body()
        if self.code == "validation_error" and "errors" not in self.extra:
            body["errors"] = [{"loc": [*where, *self.field], "msg": self.detail}]
        return body


def field_path(field: str | Sequence[str | int] | None) -> tuple[str | int, ...]:
    """``"a.b"`` and ``("a", "b")`` alike as ``("a", "b")``; nothing as ``()``."""
    if field is None:
        return ()
    if isinstance(field, str):
        return tuple(field.split(".")) if field else ()
    return tuple(field)


class IdempotencyKeyReused(DomainError):
    status, code, default_detail = (
        422,
        "idempotency_key_reused",
        "This Idempotency-Key was sent before with another request.",
    )


class Unavailable(DomainError):
    status, code, default_detail = (
        503,
        "unavailable",
        "A backing service is unavailable; retry shortly.",
    )


class TooManyWaits(DomainError):
    status, code, default_detail = 429, "too_many_waits", "Too many waits open; retry later."


class RateLimited(DomainError):
    status, code, default_detail = 429, "rate_limited", "Too many requests for this key; slow down."
