"""The API's error codes as exceptions: one class per documented code.

Every exception is a :class:`ContextopsError` carrying ``status`` (the HTTP status, or
``None`` when the server was never reached), ``code`` (the ``error`` field of the body),
``detail`` (its human sentence) and ``body`` (the whole JSON body). Catch a status family
(``Conflict``, ``Gone``) or one precise code (``InsufficientTokens``)::

    try:
        frame.reserve("evidence", 5000)
    except InsufficientTokens as exc:
        print(exc.requested, exc.available)
"""

from __future__ import annotations

from typing import Any


class ContextopsError(Exception):
    """Base of every error the client raises."""

    status: int | None = None
    code: str = "error"

    def __init__(
        self,
        detail: str = "",
        *,
        status: int | None = None,
        code: str | None = None,
        body: dict[str, Any] | None = None,
    ) -> None:
        self.body: dict[str, Any] = dict(body or {})
        if status is not None:
            self.status = status
        if code is not None:
            self.code = code
        self.detail = detail or self.body.get("detail") or self.code
        super().__init__(self.detail)

    def __str__(self) -> str:
        where = f"{self.status} " if self.status is not None else ""
        return f"{where}{self.code}: {self.detail}"


# -- the server was not reached ----------------------------------------------------------


class ConnectionFailed(ContextopsError):
    """No answer after every retry: connection refused, reset or timed out."""

    code = "connection_error"


# -- 400 ---------------------------------------------------------------------------------


class BadRequest(ContextopsError):
    status, code = 400, "bad_request"


# -- 401 / 403 ---------------------------------------------------------------------------


class Unauthenticated(ContextopsError):
    """The key is missing, malformed or revoked."""

    status, code = 401, "unauthenticated"


class Forbidden(ContextopsError):
    status, code = 403, "forbidden"


class AuthorityTooLow(Forbidden):
    code = "authority_too_low"


class PermissionDenied(Forbidden):
    code = "permission_denied"


# -- 404 / 405 ---------------------------------------------------------------------------


class NotFound(ContextopsError):
    """No such object (also another organization's), or no such API path."""

    status, code = 404, "not_found"


class MethodNotAllowed(ContextopsError):
    status, code = 405, "method_not_allowed"


# -- 409 ---------------------------------------------------------------------------------


class Conflict(ContextopsError):
    status, code = 409, "conflict"


class InsufficientTokens(Conflict):
    """The frame cannot pay: ``requested`` tokens asked for, ``available`` left."""

    code = "insufficient_tokens"

    def __init__(
        self,
        detail: str = "",
        *,
        requested: int | None = None,
        available: int | None = None,
        **kwargs: Any,
    ) -> None:
        body = dict(kwargs.pop("body", None) or {})
        if requested is not None:
            body.setdefault("requested", requested)
        if available is not None:
            body.setdefault("available", available)
        body.setdefault("error", self.code)
        self.requested: int | None = body.get("requested")
        self.available: int | None = body.get("available")
        if not detail and "detail" not in body:
            detail = f"Requested {self.requested} tokens but only {self.available} are available."
        super().__init__(detail, body=body, **kwargs)


class MaxDepthExceeded(Conflict):
    code = "max_depth_exceeded"


class AlreadySuperseded(Conflict):
    """The fact was superseded already; ``superseded_by`` names the winner."""

    code = "already_superseded"

    @property
    def superseded_by(self) -> Any:
        return self.body.get("superseded_by")


class FrameNotActive(Conflict):
    code = "frame_not_active"

    @property
    def frame_status(self) -> str | None:
        return self.body.get("status")


class FrameHasOpenChildren(Conflict):
    code = "frame_has_open_children"


class SuspensionNotApproved(Conflict):
    code = "suspension_not_approved"


class TokenUsed(Conflict):
    code = "token_used"


class AlreadyDecided(Conflict):
    code = "already_decided"


class ReadOnlyVariable(Conflict):
    code = "read_only_variable"


class SessionEnded(Conflict):
    code = "session_ended"


class IdentityReadOnly(Conflict):
    code = "identity_read_only"


class KeyExists(Conflict):
    code = "key_exists"


class FactNotCurrent(Conflict):
    code = "fact_not_current"


class CompactionInProgress(Conflict):
    code = "compaction_in_progress"

    @property
    def compaction_id(self) -> str | None:
        return self.body.get("compaction_id")


class CompactionNotRevertible(Conflict):
    code = "compaction_not_revertible"


class ChildrenIncomplete(Conflict):
    code = "children_incomplete"


class IllegalTransition(Conflict):
    """A context handle cannot move from its state to the one asked for."""

    code = "illegal_transition"


class StateExists(Conflict):
    """An imported RLM state's id is taken in this organization."""

    code = "state_exists"


# -- 410 / 413 ---------------------------------------------------------------------------


class Gone(ContextopsError):
    status, code = 410, "gone"


class SuspensionExpired(Gone):
    code = "suspension_expired"


class TooLarge(ContextopsError):
    status, code = 413, "too_large"

    @property
    def limit(self) -> int | None:
        return self.body.get("limit")


# -- 422 ---------------------------------------------------------------------------------


class ValidationError(ContextopsError):
    """``errors`` lists ``{loc, msg}``: which field, and what is wrong with it."""

    status, code = 422, "validation_error"

    @property
    def errors(self) -> list[dict[str, Any]]:
        return list(self.body.get("errors") or [])


class BudgetTooSmall(ValidationError):
    code = "budget_too_small"


# -- 429 / 5xx ---------------------------------------------------------------------------


class RateLimited(ContextopsError):
    status, code = 429, "rate_limited"

    @property
    def retry_after(self) -> float | None:
        value = self.body.get("retry_after")
        return float(value) if isinstance(value, int | float) else None


class ServerError(ContextopsError):
    status, code = 500, "internal_error"


class Unavailable(ServerError):
    status, code = 503, "unavailable"


BY_CODE: dict[str, type[ContextopsError]] = {
    cls.code: cls
    for cls in (
        BadRequest,
        Unauthenticated,
        AuthorityTooLow,
        PermissionDenied,
        NotFound,
        MethodNotAllowed,
        InsufficientTokens,
        MaxDepthExceeded,
        AlreadySuperseded,
        FrameNotActive,
        FrameHasOpenChildren,
        SuspensionNotApproved,
        TokenUsed,
        AlreadyDecided,
        ReadOnlyVariable,
        SessionEnded,
        IdentityReadOnly,
        KeyExists,
        FactNotCurrent,
        CompactionInProgress,
        CompactionNotRevertible,
        ChildrenIncomplete,
        IllegalTransition,
        StateExists,
        SuspensionExpired,
        TooLarge,
        ValidationError,
        BudgetTooSmall,
        RateLimited,
        Unavailable,
    )
}

BY_STATUS: dict[int, type[ContextopsError]] = {
    400: BadRequest,
    401: Unauthenticated,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    410: Gone,
    413: TooLarge,
    422: ValidationError,
    429: RateLimited,
    503: Unavailable,
}


def error_from_response(status: int, body: Any, text: str = "") -> ContextopsError:
    """The exception for an error answer: by its ``error`` code, else by its status."""
    if not isinstance(body, dict):
        body = {"detail": (text or "").strip()[:500] or f"HTTP {status}"}
    code = body.get("error") if isinstance(body.get("error"), str) else None
    cls = BY_CODE.get(code or "")
    if cls is None or (cls.status is not None and cls.status != status):
        cls = BY_STATUS.get(status) or (ServerError if status >= 500 else ContextopsError)
    detail = str(body.get("detail") or code or f"HTTP {status}")
    return cls(detail, status=status, code=code or cls.code, body=body)


# Spelled out so type checkers see the names; a test keeps it equal to the classes above.
__all__ = [
    "ContextopsError",
    "ConnectionFailed",
    "BadRequest",
    "Unauthenticated",
    "Forbidden",
    "AuthorityTooLow",
    "PermissionDenied",
    "NotFound",
    "MethodNotAllowed",
    "Conflict",
    "InsufficientTokens",
    "MaxDepthExceeded",
    "AlreadySuperseded",
    "FrameNotActive",
    "FrameHasOpenChildren",
    "SuspensionNotApproved",
    "TokenUsed",
    "AlreadyDecided",
    "ReadOnlyVariable",
    "SessionEnded",
    "IdentityReadOnly",
    "KeyExists",
    "FactNotCurrent",
    "CompactionInProgress",
    "CompactionNotRevertible",
    "ChildrenIncomplete",
    "IllegalTransition",
    "StateExists",
    "Gone",
    "SuspensionExpired",
    "TooLarge",
    "ValidationError",
    "BudgetTooSmall",
    "RateLimited",
    "ServerError",
    "Unavailable",
    "error_from_response",
]
