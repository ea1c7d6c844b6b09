"""Domain errors. Services raise them; the API maps each to its documented JSON body once."""

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
    """422 with a code of its own (``budget_too_small``) or field errors (``validation_error``)."""

    status = 422

    def __init__(
        self, detail: str, *, code: str = "validation_error", loc: list | None = None, **extra: Any
    ) -> None:
        self.code = code
        if code == "validation_error" and "errors" not in extra:
            extra["errors"] = [{"loc": loc or [], "msg": detail}]
        super().__init__(detail, **extra)


class Unavailable(DomainError):
    status, code, default_detail = (
        503,
        "unavailable",
        "A backing service is unavailable; retry shortly.",
    )


class RateLimited(DomainError):
    status, code, default_detail = 429, "rate_limited", "Too many requests for this key; slow down."
