"""What the sync and async clients share: the endpoint catalogue and the result objects.

Every endpoint method builds one request and hands it to ``self._call``; the sync client
runs it and returns the result, the async client returns an awaitable of it. Results are
plain JSON (``dict`` / ``list``, typed by the ``TypedDict`` classes of
:mod:`contextops_client.types`) except for three objects with methods of their own:
:class:`Session`, :class:`Frame` and :class:`Suspension`.

A method's return annotation names what the sync client returns. ``@endpoint`` tells a
type checker that the async client returns an awaitable of the same; at run time it
returns the method unchanged.
"""

from __future__ import annotations

import contextvars
import uuid
from collections.abc import Callable, Coroutine, Iterable
from typing import (
    TYPE_CHECKING,
    Any,
    Concatenate,
    Generic,
    ParamSpec,
    Self,
    TypedDict,
    TypeVar,
    overload,
)
from urllib.parse import quote

from .errors import ContextopsError, FrameNotActive
from .types import (
    Compaction,
    CompactionQueued,
    ConstraintCheck,
    ContextPack,
    ContextPackRecord,
    Environment,
    Event,
    Fact,
    FactConflict,
    FactPage,
    FactWrite,
    FrameCompaction,
    FrameHandle,
    Handle,
    HandlePageIn,
    HandlePageOut,
    Health,
    ImportJob,
    ImportQueued,
    Lineage,
    MessagesAppended,
    PendingWork,
    Pressure,
    RecoverySummary,
    RlmCheckpoint,
    RlmCheckpointDetail,
    RlmCompletion,
    RlmExport,
    RlmMutation,
    RlmState,
    RlmStatePage,
    RlmVariable,
    RlmVariableRead,
    SessionPage,
    Turn,
    WorkingSetItem,
)

JSON = dict[str, Any]

OPEN_STATUSES = frozenset({"active", "waiting", "suspended"})
CLOSED_STATUSES = frozenset({"completed", "failed", "cancelled"})
FAILURE_REASON_MAX = 2000  # the longest failure_reason the server keeps
FINISHED_COMPACTION = frozenset({"completed", "failed", "reverted"})
FINISHED_IMPORT = frozenset({"completed", "failed"})
MAX_LONG_POLL = 30.0
IDEMPOTENCY_HEADER = "Idempotency-Key"
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

# The frames each ``ops.frame(...)`` block has open, per session, in this thread or task.
_frame_stacks: contextvars.ContextVar[dict[str, tuple[Frame, ...]]] = contextvars.ContextVar(
    "contextops_frame_stacks"
)


def _stacks() -> dict[str, tuple[Frame, ...]]:
    return _frame_stacks.get({})


def current_frame(session: Any) -> Frame | None:
    """The innermost open ``ops.frame`` block of ``session`` in this context, if any."""
    stack = _stacks().get(_id(session), ())
    return stack[-1] if stack else None


def _stack_push(frame: Frame) -> contextvars.Token[dict[str, tuple[Frame, ...]]]:
    stacks = dict(_stacks())
    stacks[frame.session_id] = (*stacks.get(frame.session_id, ()), frame)
    return _frame_stacks.set(stacks)


def _stack_pop(frame: Frame, token: contextvars.Token[dict[str, tuple[Frame, ...]]]) -> None:
    try:
        _frame_stacks.reset(token)
    except ValueError:  # exited in another context than entered: drop it by hand
        stacks = dict(_stacks())
        stacks[frame.session_id] = tuple(
            f for f in stacks.get(frame.session_id, ()) if f.id != frame.id
        )
        _frame_stacks.set(stacks)


def _id(obj: Any) -> str:
    """The id of a Session, a Frame, a dict with an ``id`` or the id itself."""
    if obj is None:
        raise ValueError("an id is required")
    if isinstance(obj, Session | Frame):
        return obj.id
    if isinstance(obj, dict):
        return str(obj["id"])
    return str(obj)


def _seg(value: Any) -> str:
    """One path segment, percent-encoded (fact keys and variable names may hold anything)."""
    return quote(str(value), safe="")


def _turn_list(data: Any) -> list[JSON]:
    """The turns whether the server answers a list or ``{count, turns}``."""
    if isinstance(data, dict):
        return list(data.get("turns") or [])
    return list(data or [])


def _drop_none(**fields: Any) -> JSON:
    return {k: v for k, v in fields.items() if v is not None}


class _Remote:
    """An object of the server as the client holds it: its JSON, equal by id.

    Its shortcut methods return what the client's method returns: the answer with a
    ``Client``, an awaitable of it with an ``AsyncClient`` (hence ``Any``)."""

    def __init__(self, client: Any, data: JSON) -> None:
        self._client = client
        self.data = data

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)

    def _absorb(self, data: JSON) -> Self:
        self.data = data
        return self

    @property
    def id(self) -> str:
        return str(self.data["id"])


class Session(_Remote):
    """A session: ``id``, ``dashboard_url`` (absolute) and the fields the API returned in ``data``.

    Its methods are shortcuts to the client's, with this session filled in.
    """

    def __repr__(self) -> str:
        return f"<Session {self.id}>"

    @property
    def dashboard_url(self) -> str:
        return self._client.absolute_url(self.data.get("dashboard_url") or f"/sessions/{self.id}/")

    @property
    def pressure(self) -> JSON:
        return self.data.get("pressure") or {}

    @property
    def usage_totals(self) -> JSON:
        return self.data.get("usage_totals") or {}

    @property
    def top_frame_id(self) -> str | None:
        value = self.data.get("top_frame_id")
        return str(value) if value else None

    def refresh(self) -> Any:
        return self._client._call("GET", f"/sessions/{self.id}", wrap=self._absorb)

    def frame(self, goal: str, budget: int, **kwargs: Any) -> Any:
        return self._client.frame(self, goal=goal, budget=budget, **kwargs)

    def resume(self) -> Any:
        return self._client.session_resume(self)

    def events(self, after: int = 0, **kwargs: Any) -> Any:
        return self._client.events(self, after=after, **kwargs)

    def pressure_get(self) -> Any:
        return self._client.pressure(self)

    def context_pack(self, budget_tokens: int, **kwargs: Any) -> Any:
        return self._client.context_pack(self, budget_tokens=budget_tokens, **kwargs)

    def end(self) -> Any:
        return self._client.session_end(self)


class Frame(_Remote):
    """A frame: ``id``, ``session_id``, ``budget`` (``total, used, reserved,
    subcall_allocation, available``), ``status`` and the rest in ``data``.

    Methods that change the frame on the server (``reserve``, ``usage``, ``pop``,
    ``refresh``) also update this object with the frame the server returns.
    """

    def __repr__(self) -> str:
        return f"<Frame {self.id} {self.status} {self.goal[:40]!r}>"

    @property
    def session_id(self) -> str:
        return str(self.data["session_id"])

    @property
    def parent_frame_id(self) -> str | None:
        value = self.data.get("parent_frame_id")
        return str(value) if value else None

    @property
    def goal(self) -> str:
        return self.data.get("goal", "")

    @property
    def status(self) -> str:
        return self.data.get("status", "")

    @property
    def failure_reason(self) -> str | None:
        """Why a failed frame failed (the agent's words, or ``suspension_expired``)."""
        return self.data.get("failure_reason")

    @property
    def depth(self) -> int:
        return int(self.data.get("depth", 0))

    @property
    def budget(self) -> JSON:
        return self.data.get("budget") or {}

    @property
    def result_refs(self) -> list[Any]:
        return self.data.get("result_refs") or []

    @property
    def available(self) -> int:
        """Tokens left as of the last answer about this frame (``refresh()`` to update)."""
        return int(self.budget.get("available", 0))

    @property
    def dashboard_url(self) -> str:
        return self._client.absolute_url(self.data.get("dashboard_url") or f"/frames/{self.id}/")

    def refresh(self) -> Any:
        return self._client._call("GET", f"/frames/{self.id}", wrap=self._absorb)

    def context_pack(self, budget_tokens: int, **kwargs: Any) -> Any:
        return self._client.context_pack(
            self.session_id, budget_tokens=budget_tokens, frame=self, **kwargs
        )

    def handle(self, kind: str, content: str | None = None, **kwargs: Any) -> Any:
        return self._client.handle_add(self, kind=kind, content=content, **kwargs)

    def usage(self, input_tokens: int, output_tokens: int, **kwargs: Any) -> Any:
        return self._client.usage_record(
            self, input_tokens=input_tokens, output_tokens=output_tokens, **kwargs
        )

    def reserve(self, purpose: str, amount: int) -> Any:
        return self._client.frame_reserve(self, purpose=purpose, amount=amount)

    def suspend(self, reason: str, **kwargs: Any) -> Any:
        return self._client.frame_suspend(self, reason=reason, **kwargs)

    def add_results(self, *result_refs: Any) -> Any:
        return self._client.frame_results_add(self, list(result_refs))

    def pop(
        self,
        status: str = "completed",
        result_refs: list[Any] | None = None,
        failure_reason: str | None = None,
    ) -> Any:
        return self._client.frame_pop(
            self, status=status, result_refs=result_refs, failure_reason=failure_reason
        )

    def ancestry(self) -> Any:
        return self._client.frame_ancestry(self)

    def children(self, **kwargs: Any) -> Any:
        return self._client.frame_children(self, **kwargs)


class Suspension:
    """A suspension: ``token``, ``status`` (pending, approved, rejected, expired, resumed),
    ``approve_url`` (the inbox where a person decides) and ``frame_id``."""

    def __init__(self, client: Any, data: JSON) -> None:
        self._client = client
        self.data = data

    def __repr__(self) -> str:
        return f"<Suspension {self.status} frame={self.frame_id}>"

    def _absorb(self, data: JSON) -> Suspension:
        self.data = data
        return self

    @property
    def token(self) -> str:
        return str(self.data["token"])

    @property
    def status(self) -> str:
        return self.data.get("status", "")

    @property
    def frame_id(self) -> str:
        return str(self.data.get("frame_id", ""))

    @property
    def approve_url(self) -> str:
        return self._client.absolute_url(self.data.get("approve_url") or "/inbox/")

    def refresh(self) -> Any:
        return self._client._call("GET", f"/suspensions/{_seg(self.token)}", wrap=self._absorb)

    def wait(self, timeout: float = 30.0) -> Any:
        """Long-poll until the status is no longer ``pending`` or ``timeout`` seconds pass;
        returns the status then."""
        return self._client.suspension_wait(self, timeout=timeout)

    def resume(self) -> Any:
        return self._client.suspension_resume(self)


if TYPE_CHECKING:
    _P = ParamSpec("_P")
    _R = TypeVar("_R")

    class endpoint(Generic[_P, _R]):
        """An endpoint method ``(self, ...) -> R`` as the type checker sees it: ``R`` on a
        :class:`SyncApi` (the ``Client``), a coroutine of ``R`` on an :class:`AsyncApi`
        (the ``AsyncClient``)."""

        def __init__(self, method: Callable[Concatenate[Any, _P], _R]) -> None: ...

        @overload
        def __get__(self, obj: None, owner: type[Any]) -> Self: ...
        @overload
        def __get__(
            self, obj: AsyncApi, owner: type[Any] | None = None
        ) -> Callable[_P, Coroutine[Any, Any, _R]]: ...
        @overload
        def __get__(self, obj: SyncApi, owner: type[Any] | None = None) -> Callable[_P, _R]: ...
        @overload
        def __get__(self, obj: Api, owner: type[Any] | None = None) -> Callable[_P, Any]: ...
        def __get__(self, obj: Any, owner: Any = None) -> Any: ...
        def __call__(self, obj: Api, /, *args: _P.args, **kwargs: _P.kwargs) -> Any: ...

else:

    def endpoint(method):
        return method


class SessionResume(TypedDict):
    """``GET /sessions/{id}/resume`` (``ResumeOut``) with its frames as :class:`Frame`
    objects: the current frame, the open frames root first, the work left unfinished."""

    current_frame: Frame | None
    frame_stack: list[Frame]
    pending_work: list[PendingWork]
    recovery_summary: RecoverySummary


class Api:
    """The endpoint catalogue of ``/api/v1`` (see docs/api.md). Subclasses provide ``_call``."""

    transport: Any
    # Every write carries a fresh Idempotency-Key, the same on each of its retries, so the
    # server applies it once and a write whose answer was lost may be sent again.
    idempotency_keys: bool = True

    def _idempotency_headers(self, method: str) -> dict[str, str]:
        """The headers that make one write call safe to repeat: a new key per call."""
        if not self.idempotency_keys or method.upper() not in WRITE_METHODS:
            return {}
        return {IDEMPOTENCY_HEADER: str(uuid.uuid4())}

    def _call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: JSON | None = None,
        timeout: float | None = None,
        wrap: Callable[[Any], Any] | None = None,
        idempotent: bool = False,
    ) -> Any:  # pragma: no cover - provided by Client and AsyncClient
        raise NotImplementedError

    # -- helpers -----------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return self.transport.base_url

    def absolute_url(self, path: str) -> str:
        """A dashboard address from a path the API returned (absolute ones pass through)."""
        if "://" in path:
            return path
        return self.base_url + (path if path.startswith("/") else "/" + path)

    def _session(self, data: JSON) -> Session:
        return Session(self, data)

    def _frame(self, data: JSON) -> Frame:
        return Frame(self, data)

    def _frames(self, data: list[JSON]) -> list[Frame]:
        return [Frame(self, d) for d in data]

    def _frame_wrap(self, frame: Any) -> Callable[[JSON], Frame]:
        return frame._absorb if isinstance(frame, Frame) else self._frame

    @endpoint
    def request(
        self, method: str, path: str, *, json: Any = None, params: JSON | None = None
    ) -> Any:
        """Any API call, for paths this client has no method for: path relative to /api/v1."""
        return self._call(method, path, json=json, params=params)

    @endpoint
    def health(self) -> Health:
        return self._call("GET", "/health")

    # -- sessions ----------------------------------------------------------------------

    @endpoint
    def session_create(
        self,
        *,
        identity: JSON | None = None,
        environment: JSON | None = None,
        context_window_tokens: int | None = None,
        model: str | None = None,
        title: str | None = None,
        compaction_threshold: float | None = None,
        eviction_policy: str | None = None,
    ) -> Session:
        """``POST /sessions`` → :class:`Session`. ``identity``: user_name, user_id,
        authority, department, organization, permissions; ``environment``: timezone,
        location, external_data."""
        body = _drop_none(
            identity=identity,
            environment=environment,
            context_window_tokens=context_window_tokens,
            model=model,
            title=title,
            compaction_threshold=compaction_threshold,
            eviction_policy=eviction_policy,
        )
        return self._call("POST", "/sessions", json=body, wrap=self._session)

    session = session_create

    @endpoint
    def session_get(self, session: Any) -> Session:
        return self._call("GET", f"/sessions/{_id(session)}", wrap=self._session)

    @endpoint
    def sessions(
        self, *, search: str | None = None, limit: int | None = None, offset: int = 0
    ) -> SessionPage:
        """``GET /sessions`` → ``{items: [session...], count, next_offset}`` (plain JSON)."""
        return self._call(
            "GET", "/sessions", params=_drop_none(search=search, limit=limit, offset=offset)
        )

    @endpoint
    def session_end(self, session: Any) -> Session:
        wrap = session._absorb if isinstance(session, Session) else self._session
        return self._call("POST", f"/sessions/{_id(session)}/end", wrap=wrap)

    @endpoint
    def session_resume(self, session: Any) -> SessionResume:
        """``GET /sessions/{id}/resume`` → ``{current_frame, frame_stack[], pending_work[],
        recovery_summary}`` with the frames as :class:`Frame` objects."""

        def wrap(data: JSON) -> JSON:
            data = dict(data)
            if data.get("current_frame"):
                data["current_frame"] = self._frame(data["current_frame"])
            data["frame_stack"] = self._frames(data.get("frame_stack") or [])
            return data

        return self._call("GET", f"/sessions/{_id(session)}/resume", wrap=wrap)

    @endpoint
    def events(
        self,
        session: Any,
        *,
        after: int = 0,
        limit: int | None = None,
        frame: Any = None,
    ) -> list[Event]:
        """``GET /sessions/{id}/events?after=SEQ`` → events in order (``seq``, ``type``, ...)."""
        params = _drop_none(after=after, limit=limit, frame_id=_id(frame) if frame else None)
        return self._call("GET", f"/sessions/{_id(session)}/events", params=params)

    # -- frames ------------------------------------------------------------------------

    @endpoint
    def frame_push(
        self,
        session: Any,
        *,
        goal: str,
        budget: int,
        parent: Any = None,
        inputs: JSON | None = None,
        max_subframe_depth: int | None = None,
    ) -> Frame:
        """``POST /sessions/{id}/frames`` → :class:`Frame`; a child's budget comes out of
        its parent's available tokens (:class:`InsufficientTokens` when it cannot)."""
        body: JSON = {
            "goal": goal,
            "inputs": inputs or {},
            "budget": _drop_none(total=budget, max_subframe_depth=max_subframe_depth),
        }
        if parent is not None:
            body["parent_frame_id"] = _id(parent)
        return self._call("POST", f"/sessions/{_id(session)}/frames", json=body, wrap=self._frame)

    @endpoint
    def frame_get(self, frame: Any) -> Frame:
        return self._call("GET", f"/frames/{_id(frame)}", wrap=self._frame)

    @endpoint
    def frame_ancestry(self, frame: Any) -> list[Frame]:
        return self._call("GET", f"/frames/{_id(frame)}/ancestry", wrap=self._frames)

    @endpoint
    def frame_children(
        self, frame: Any, *, limit: int | None = None, offset: int = 0
    ) -> list[Frame]:
        return self._call(
            "GET",
            f"/frames/{_id(frame)}/children",
            params=_drop_none(limit=limit, offset=offset),
            wrap=self._frames,
        )

    @endpoint
    def frames(
        self,
        session: Any,
        *,
        status: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[Frame]:
        """``GET /sessions/{id}/frames``: one page of the session's frames in the order
        they were pushed (``status``'s alone, given one)."""
        return self._call(
            "GET",
            f"/sessions/{_id(session)}/frames",
            params=_drop_none(status=status, limit=limit, offset=offset),
            wrap=lambda page: self._frames(page["items"]),
        )

    @endpoint
    def frame_reserve(self, frame: Any, *, purpose: str, amount: int) -> Frame:
        return self._call(
            "POST",
            f"/frames/{_id(frame)}/reserve",
            json={"purpose": purpose, "amount": amount},
            wrap=self._frame_wrap(frame),
        )

    @endpoint
    def frame_results_add(self, frame: Any, result_refs: list[Any]) -> Frame:
        """``POST /frames/{id}/results``: results the open frame has produced so far (they
        stay with it and are there when it pops) → the frame."""
        return self._call(
            "POST",
            f"/frames/{_id(frame)}/results",
            json={"result_refs": result_refs},
            wrap=self._frame_wrap(frame),
        )

    @endpoint
    def usage_record(
        self,
        frame: Any,
        *,
        input_tokens: int,
        output_tokens: int,
        cache_creation_input_tokens: int = 0,
        cache_read_input_tokens: int = 0,
        model: str = "",
        message_id: str = "",
        started_at: str | None = None,
        latency_ms: int | None = None,
    ) -> Frame:
        """``POST /frames/{id}/usage``: one model call's four usage fields → the frame.

        With ``message_id`` (the provider's response id) the server charges the call once
        however often the record arrives, so a record whose answer was lost is sent again.
        ``started_at`` (ISO 8601) and ``latency_ms`` say when the call left and how long
        its answer took; the calls trace shows them.
        """
        body: dict[str, Any] = {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": cache_creation_input_tokens,
            "cache_read_input_tokens": cache_read_input_tokens,
            "model": model,
            "message_id": message_id,
        }
        if started_at is not None:
            body["started_at"] = started_at
        if latency_ms is not None:
            body["latency_ms"] = latency_ms
        return self._call(
            "POST",
            f"/frames/{_id(frame)}/usage",
            json=body,
            wrap=self._frame_wrap(frame),
            idempotent=bool(message_id),
        )

    @endpoint
    def frame_pop(
        self,
        frame: Any,
        *,
        status: str = "completed",
        result_refs: list[Any] | None = None,
        failure_reason: str | None = None,
    ) -> Frame:
        """``POST /frames/{id}/pop`` (completed or failed) → the frame; settles the parent.
        ``failure_reason`` (with ``failed``) says why, on the frame's page."""
        body: dict[str, Any] = {"status": status, "result_refs": list(result_refs or [])}
        if failure_reason:
            body["failure_reason"] = failure_reason[:FAILURE_REASON_MAX]
        return self._call(
            "POST", f"/frames/{_id(frame)}/pop", json=body, wrap=self._frame_wrap(frame)
        )

    @endpoint
    def handle_add(
        self,
        frame: Any,
        *,
        kind: str,
        content: str | None = None,
        ref: str | None = None,
        priority: str = "medium",
        category: str = "",
        tool_call_id: str = "",
        estimated_tokens: int | None = None,
        state: str | None = None,
    ) -> FrameHandle:
        """``POST /frames/{id}/handles`` → ``{id, estimated_tokens, state, ...}``;
        ``state="cold"`` discovers a resource without loading it."""
        body = _drop_none(
            kind=kind,
            priority=priority,
            content=content,
            ref=ref,
            category=category,
            tool_call_id=tool_call_id,
            estimated_tokens=estimated_tokens,
            state=state,
        )
        return self._call("POST", f"/frames/{_id(frame)}/handles", json=body)

    # -- suspension --------------------------------------------------------------------

    @endpoint
    def frame_suspend(
        self,
        frame: Any,
        *,
        reason: str,
        requires_approval: bool = False,
        expires_in_seconds: int | None = None,
    ) -> Suspension:
        """``POST /frames/{id}/suspend`` → :class:`Suspension` (its ``token`` resumes it)."""
        body = _drop_none(
            reason=reason,
            requires_approval=requires_approval,
            expires_in_seconds=expires_in_seconds,
        )
        return self._call(
            "POST",
            f"/frames/{_id(frame)}/suspend",
            json=body,
            wrap=lambda d: Suspension(self, d),
        )

    @endpoint
    def suspension_get(self, suspension: Any, *, wait: float | None = None) -> Suspension:
        """``GET /suspensions/{token}``; with ``wait`` (≤ 30 s) the server holds the answer
        while the suspension is pending."""
        token = suspension.token if isinstance(suspension, Suspension) else str(suspension)
        wrap = suspension._absorb if isinstance(suspension, Suspension) else None
        return self._call(
            "GET",
            f"/suspensions/{_seg(token)}",
            params=_drop_none(wait=wait),
            timeout=(wait + 15.0) if wait else None,
            wrap=wrap or (lambda d: Suspension(self, d)),
        )

    @endpoint
    def suspension_resume(self, suspension: Any) -> Frame:
        """``POST /suspensions/{token}/resume`` → the frame, active again. Raises
        :class:`SuspensionNotApproved`, :class:`TokenUsed` or :class:`SuspensionExpired`."""
        token = suspension.token if isinstance(suspension, Suspension) else str(suspension)
        return self._call("POST", f"/suspensions/{_seg(token)}/resume", wrap=self._frame)

    @endpoint
    def suspension_approve(self, suspension: Any, *, note: str = "") -> Suspension:
        """``POST /suspensions/{token}/approve`` → the :class:`Suspension`, approved.

        A person's act: only a personal key (``create_api_key --user``) whose user may
        approve suspensions may; any other key raises :class:`PermissionDenied`. Raises
        :class:`AlreadyDecided` and :class:`SuspensionExpired` as the inbox refuses."""
        return self._decide(suspension, "approve", note)

    @endpoint
    def suspension_reject(self, suspension: Any, *, note: str) -> Suspension:
        """``POST /suspensions/{token}/reject`` with the reason (required: a
        :class:`ValidationError` without one) → the :class:`Suspension`, rejected; its
        frame has failed. A personal key only, as :meth:`suspension_approve`."""
        return self._decide(suspension, "reject", note)

    def _decide(self, suspension: Any, verdict: str, note: str) -> Any:
        token = suspension.token if isinstance(suspension, Suspension) else str(suspension)
        wrap = suspension._absorb if isinstance(suspension, Suspension) else None
        return self._call(
            "POST",
            f"/suspensions/{_seg(token)}/{verdict}",
            json={"note": note},
            wrap=wrap or (lambda d: Suspension(self, d)),
        )

    # -- transcript imports ------------------------------------------------------------

    @endpoint
    def import_create(
        self,
        file_name: str,
        content: str,
        *,
        offset: int = 0,
        format: str | None = None,
        final: bool = True,
        subagents: Iterable[JSON] | None = None,
        title: str | None = None,
        timeout: float | None = None,
    ) -> ImportQueued:
        """``POST /imports`` (202) → ``{id, status, session_id, source, received_bytes}``:
        a transcript (or the part of it from byte ``offset`` on) queued for a worker.

        ``format`` is ``claude_code``, ``anthropic`` or ``openai`` (detected when left
        out); ``subagents`` are ``{file_name, content, offset}`` of Claude Code's
        ``subagents/agent-*.jsonl``; ``final=False`` keeps the session open for more.
        The server imports the same transcript once, so a request whose answer was lost
        is sent again. An ``offset`` the server does not hold raises :class:`Conflict`
        ``import_offset_mismatch`` whose ``body["expected_offset"]`` says where to resume.
        """
        body = _drop_none(
            file_name=file_name,
            content=content,
            offset=offset,
            format=format,
            final=final,
            subagents=list(subagents) if subagents is not None else None,
            title=title,
        )
        return self._call("POST", "/imports", json=body, timeout=timeout, idempotent=True)

    @endpoint
    def import_get(self, job: Any) -> ImportJob:
        """``GET /imports/{id}`` → ``{id, status, progress: {done, total}, session_id,
        result, error, created_at, finished_at}``; ``result`` is the summary
        ``import_transcript --json`` prints."""
        return self._call("GET", f"/imports/{_seg(_id(job))}")

    # -- facts, constraints ------------------------------------------------------------

    @endpoint
    def fact_write(
        self,
        key: str,
        value: Any,
        *,
        source: str,
        subject: str | None = None,
        observed_at: str | None = None,
        valid_from: str | None = None,
        memory_type: str | None = None,
        scope: str | None = None,
        scope_id: str | None = None,
        supersedes: str | None = None,
        depends_on: Iterable[str] | None = None,
        is_constraint: bool | None = None,
        constraint_type: str | None = None,
        constraint: JSON | None = None,
        read_authority: str | None = None,
        read_permission: str | None = None,
        utterance: str | None = None,
    ) -> FactWrite:
        """``POST /facts`` → the fact with ``outcome`` (created, superseded, proposal,
        outdated, unchanged). ``utterance``, the user's own words, lets the explicit rule's
        keywords ("moved", "actually", …; docs/concepts.md#supersession) make it an explicit
        supersession (``detected_keywords``);
        ``read_permission`` keeps it out of contexts whose identity lacks that permission.
        Raises :class:`AlreadySuperseded` (``superseded_by``), :class:`AuthorityTooLow`,
        :class:`KeyExists`."""
        body = _drop_none(
            key=key,
            value=value,
            source=source,
            subject=subject,
            observed_at=observed_at,
            valid_from=valid_from,
            memory_type=memory_type,
            scope=scope,
            scope_id=scope_id,
            supersedes=supersedes,
            depends_on=list(depends_on) if depends_on is not None else None,
            is_constraint=is_constraint,
            constraint_type=constraint_type,
            constraint=constraint,
            read_authority=read_authority,
            read_permission=read_permission,
            utterance=utterance,
        )
        return self._call("POST", "/facts", json=body)

    @endpoint
    def fact_get(self, key: str) -> Fact:
        return self._call("GET", f"/facts/{_seg(key)}")

    @endpoint
    def fact_current(self, key: str, *, at: str | None = None) -> Fact:
        """The chain's current version; with ``at`` (ISO 8601 with a zone), the one that held then."""
        return self._call("GET", f"/facts/{_seg(key)}/current", params=_drop_none(at=at))

    @endpoint
    def fact_conflicts(
        self,
        *,
        status: str | None = None,
        subject: str | None = None,
        source: str | None = None,
        min_age_hours: int | None = None,
        max_age_hours: int | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> JSON:
        """``GET /fact-conflicts`` → ``{items, count, next_offset}``: proposed supersessions
        (``status`` proposed by default; ``any`` for all), newest first."""
        return self._call(
            "GET",
            "/fact-conflicts",
            params=_drop_none(
                status=status,
                subject=subject,
                source=source,
                min_age_hours=min_age_hours,
                max_age_hours=max_age_hours,
                limit=limit,
                offset=offset,
            ),
        )

    @endpoint
    def fact_conflict_decide(self, conflict_id: int | str, decision: str) -> FactConflict:
        """``POST /fact-conflicts/{id}/{decision}``: ``accept`` (rule 2, within your
        authority), ``reject`` or ``distinct`` (not the same thing)."""
        return self._call("POST", f"/fact-conflicts/{_seg(str(conflict_id))}/{_seg(decision)}")

    @endpoint
    def fact_lineage(self, key: str) -> Lineage:
        return self._call("GET", f"/facts/{_seg(key)}/lineage")

    @endpoint
    def facts(
        self,
        *,
        valid: bool | str | None = True,
        scope: str | None = None,
        scope_id: str | None = None,
        subject: str | None = None,
        needs_review: bool | None = None,
        memory_type: str | None = None,
        status: str | None = None,
        limit: int | None = None,
        offset: int = 0,
        valid_at: str | None = None,
    ) -> FactPage:
        """``GET /facts`` → ``{items, count, next_offset}``; ``valid=None`` lists every version,
        ``valid_at`` (ISO 8601) the versions that held at that time."""
        valid_param = "any" if valid is None else valid
        return self._call(
            "GET",
            "/facts",
            params=_drop_none(
                valid=valid_param,
                scope=scope,
                scope_id=scope_id,
                subject=subject,
                needs_review=needs_review,
                memory_type=memory_type,
                status=status,
                limit=limit,
                offset=offset,
                valid_at=valid_at,
            ),
        )

    @endpoint
    def fact_promote(self, key: str) -> FactWrite:
        return self._call("POST", f"/facts/{_seg(key)}/promote")

    @endpoint
    def fact_discard(self, key: str) -> Fact:
        return self._call("POST", f"/facts/{_seg(key)}/discard")

    @endpoint
    def fact_review(self, key: str) -> Fact:
        return self._call("POST", f"/facts/{_seg(key)}/review")

    @endpoint
    def fact_invalidate(self, key: str) -> Fact:
        return self._call("POST", f"/facts/{_seg(key)}/invalidate")

    @endpoint
    def constraints_check(
        self, subject: str, value: Any, *, scope_id: str | None = None
    ) -> ConstraintCheck:
        """``POST /constraints/check`` → ``{allowed, violations: [{fact_key, constraint, detail}]}``."""
        body = _drop_none(subject=subject, value=value, scope_id=scope_id)
        return self._call("POST", "/constraints/check", json=body)

    # -- working set, environment ------------------------------------------------------

    @endpoint
    def working_set(self, session: Any) -> list[WorkingSetItem]:
        return self._call("GET", f"/sessions/{_id(session)}/working-set")

    @endpoint
    def working_set_get(self, session: Any, key: str) -> WorkingSetItem:
        return self._call("GET", f"/sessions/{_id(session)}/working-set/{_seg(key)}")

    @endpoint
    def working_set_put(
        self, session: Any, key: str, value: Any, *, ttl_seconds: int | None = None
    ) -> WorkingSetItem:
        return self._call(
            "PUT",
            f"/sessions/{_id(session)}/working-set/{_seg(key)}",
            json=_drop_none(value=value, ttl_seconds=ttl_seconds),
        )

    @endpoint
    def working_set_delete(self, session: Any, key: str) -> None:
        return self._call("DELETE", f"/sessions/{_id(session)}/working-set/{_seg(key)}")

    @endpoint
    def environment_get(self, session: Any) -> Environment:
        return self._call("GET", f"/sessions/{_id(session)}/environment")

    @endpoint
    def environment_put(
        self,
        session: Any,
        *,
        timezone: str | None = None,
        location: str | None = None,
        external_data: JSON | None = None,
    ) -> Environment:
        """``PUT /sessions/{id}/environment``: fields left out keep their value."""
        body = _drop_none(timezone=timezone, location=location, external_data=external_data)
        return self._call("PUT", f"/sessions/{_id(session)}/environment", json=body)

    # -- context packs, pressure, paging ------------------------------------------------

    @endpoint
    def context_pack(
        self,
        session: Any,
        *,
        budget_tokens: int,
        frame: Any = None,
        query: str | None = None,
        include_handles: Iterable[Any] | None = None,
        exclude_handles: Iterable[Any] | None = None,
        min_compaction: str | None = None,
        as_of_seq: int | None = None,
        valid_at: str | None = None,
    ) -> ContextPack:
        """``POST /sessions/{id}/context-pack`` → ``{brief_context, breadcrumbs, facts,
        working_set, segments, dropped, token_summary}``; ``token_summary.used`` ≤
        ``budget_tokens``. ``as_of_seq``: the pack as it would have been right after that
        event of the session (a replay); ``valid_at`` (ISO 8601 with a zone): the facts that
        held at that time."""
        body = _drop_none(
            frame_id=_id(frame) if frame is not None else None,
            budget_tokens=budget_tokens,
            query=query,
            include_handles=[_id(h) for h in include_handles] if include_handles else None,
            exclude_handles=[_id(h) for h in exclude_handles] if exclude_handles else None,
            min_compaction=min_compaction,
            as_of_seq=as_of_seq,
            valid_at=valid_at,
        )
        return self._call("POST", f"/sessions/{_id(session)}/context-pack", json=body)

    @endpoint
    def context_packs(
        self, session: Any, *, limit: int | None = None, offset: int | None = None
    ) -> list[ContextPackRecord]:
        """``GET /sessions/{id}/context-packs``: the recorded packs, newest first."""
        return self._call(
            "GET",
            f"/sessions/{_id(session)}/context-packs",
            params=_drop_none(limit=limit, offset=offset),
        )

    @endpoint
    def context_pack_get(self, pack: Any) -> ContextPackRecord:
        """``GET /context-packs/{id}``: one recorded pack, as the list gives it."""
        return self._call("GET", f"/context-packs/{_id(pack)}")

    @endpoint
    def context_pack_diff(self, a: Any, b: Any) -> dict[str, Any]:
        """``GET /context-packs/{a}/diff/{b}`` → ``{a, b, added, dropped, changed}``: what
        ``b`` added, dropped and shows differently from ``a``, each with its reason."""
        return self._call("GET", f"/context-packs/{_id(a)}/diff/{_id(b)}")

    @endpoint
    def pressure(self, session: Any) -> Pressure:
        """``GET /sessions/{id}/pressure`` → ``{level, utilization, recommended_actions,
        eviction_candidates}``."""
        return self._call("GET", f"/sessions/{_id(session)}/pressure")

    @endpoint
    def handle_page_out(self, handle: Any) -> HandlePageOut:
        return self._call("POST", f"/handles/{_id(handle)}/page-out")

    @endpoint
    def handle_page_in(self, handle: Any, *, mode: str = "summary") -> HandlePageIn:
        return self._call("POST", f"/handles/{_id(handle)}/page-in", params={"mode": mode})

    @endpoint
    def handle_attention(self, handle: Any, weight: float) -> Handle:
        return self._call("POST", f"/handles/{_id(handle)}/attention", json={"weight": weight})

    @endpoint
    def handle_state(self, handle: Any, to: str) -> Handle | HandlePageOut:
        return self._call("POST", f"/handles/{_id(handle)}/state", json={"to": to})

    @endpoint
    def handle_annotate(self, handle: Any, note: str) -> Handle:
        """``POST /handles/{id}/annotations`` → the handle with its notes."""
        return self._call("POST", f"/handles/{_id(handle)}/annotations", json={"note": note})

    @endpoint
    def frame_compact(
        self, frame: Any, *, target_tokens: int, strategy: str, message_count: int | None = None
    ) -> FrameCompaction:
        """``POST /frames/{id}/compact`` → ``{original_tokens, final_tokens,
        compaction_level, items_removed, items_summarized, ...}``."""
        body = _drop_none(
            target_tokens=target_tokens, strategy=strategy, message_count=message_count
        )
        return self._call("POST", f"/frames/{_id(frame)}/compact", json=body)

    # -- conversation and compaction ---------------------------------------------------

    @endpoint
    def messages_append(
        self, session: Any, messages: list[JSON], *, usage: JSON | None = None, frame: Any = None
    ) -> MessagesAppended:
        """``POST /sessions/{id}/messages`` (Anthropic Messages format) → ``{messages, turns,
        occupancy_tokens, compaction_id}``; ``usage`` (the four fields, model, message_id)
        is charged to ``frame`` (an open frame of the session: :class:`NotFound` otherwise,
        :class:`FrameNotActive` when closed), else to the session's top frame. With a
        ``message_id`` the append is idempotent, so a lost answer is sent again."""
        body = _drop_none(
            messages=messages, usage=usage, frame_id=_id(frame) if frame is not None else None
        )
        return self._call(
            "POST",
            f"/sessions/{_id(session)}/messages",
            json=body,
            idempotent=bool((usage or {}).get("message_id")),
        )

    @endpoint
    def turns(
        self,
        session: Any,
        *,
        branch: str | None = None,
        after: int | None = None,
        limit: int | None = None,
    ) -> list[Turn]:
        """``GET /sessions/{id}/turns`` → the turns in order: ``[{index, user_message,
        tool_calls, tool_results, assistant_response, tokens, anchor, summarized,
        summary_id, ...}]``."""
        return self._call(
            "GET",
            f"/sessions/{_id(session)}/turns",
            params=_drop_none(branch=branch, after=after, limit=limit),
            wrap=_turn_list,
        )

    @endpoint
    def compaction_create(
        self,
        session: Any,
        *,
        strategy: str | None = None,
        target_tokens: int | None = None,
        keep_turns: int | None = None,
    ) -> CompactionQueued:
        """``POST /sessions/{id}/compactions`` → ``{id, status}`` (202, runs on the worker)."""
        body = _drop_none(strategy=strategy, target_tokens=target_tokens, keep_turns=keep_turns)
        return self._call("POST", f"/sessions/{_id(session)}/compactions", json=body)

    @endpoint
    def compactions(self, session: Any) -> list[Compaction]:
        return self._call("GET", f"/sessions/{_id(session)}/compactions")

    @endpoint
    def compaction_get(self, compaction: Any) -> Compaction:
        return self._call("GET", f"/compactions/{_id(compaction)}")

    @endpoint
    def compaction_revert(self, compaction: Any) -> Compaction:
        return self._call("POST", f"/compactions/{_id(compaction)}/revert")

    # -- RLM state ---------------------------------------------------------------------

    @endpoint
    def rlm_state_create(
        self,
        prompt: str,
        *,
        session: Any = None,
        frame: Any = None,
        tree_id: str | None = None,
        execution_config: JSON | None = None,
    ) -> RlmState:
        """``POST /rlm/states`` → the state (``state_id``, ``Final`` unset, ``prompt`` set).
        Attached to a ``frame``, writing ``Final`` pops that frame as completed."""
        body = _drop_none(
            prompt=prompt,
            session_id=_id(session) if session is not None else None,
            frame_id=_id(frame) if frame is not None else None,
            tree_id=tree_id,
            execution_config=execution_config,
        )
        return self._call("POST", "/rlm/states", json=body)

    @endpoint
    def rlm_states(
        self,
        *,
        session: Any = None,
        tree_id: str | None = None,
        completion_status: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> RlmStatePage:
        params = _drop_none(
            session_id=_id(session) if session is not None else None,
            tree_id=tree_id,
            completion_status=completion_status,
            limit=limit,
            offset=offset,
        )
        return self._call("GET", "/rlm/states", params=params)

    @endpoint
    def rlm_state_get(self, state_id: str) -> RlmState:
        return self._call("GET", f"/rlm/states/{_seg(state_id)}")

    @endpoint
    def rlm_state_export(self, state_id: str) -> RlmExport:
        return self._call("GET", f"/rlm/states/{_seg(state_id)}/export")

    @endpoint
    def rlm_state_import(self, document: JSON) -> RlmState:
        return self._call("POST", "/rlm/states/import", json=document)

    @endpoint
    def rlm_completion(self, state_id: str) -> RlmCompletion:
        return self._call("GET", f"/rlm/states/{_seg(state_id)}/completion")

    @endpoint
    def rlm_variable_get(self, state_id: str, name: str) -> RlmVariableRead:
        return self._call("GET", f"/rlm/states/{_seg(state_id)}/variables/{_seg(name)}")

    @endpoint
    def rlm_variable_put(
        self,
        state_id: str,
        name: str,
        value: Any,
        *,
        type: str | None = None,
        description: str | None = None,
        source: str | None = None,
        read_only: bool | None = None,
        scope: str | None = None,
        ttl_seconds: int | None = None,
    ) -> RlmVariable:
        """``PUT /rlm/states/{id}/variables/{name}``; writing ``Final`` completes the state
        (:class:`ReadOnlyVariable` for ``prompt`` and a set ``Final``)."""
        body = _drop_none(
            value=value,
            type=type,
            description=description,
            source=source,
            read_only=read_only,
            scope=scope,
            ttl_seconds=ttl_seconds,
        )
        return self._call("PUT", f"/rlm/states/{_seg(state_id)}/variables/{_seg(name)}", json=body)

    @endpoint
    def rlm_variable_delete(self, state_id: str, name: str) -> RlmMutation:
        return self._call("DELETE", f"/rlm/states/{_seg(state_id)}/variables/{_seg(name)}")

    @endpoint
    def rlm_final(self, state_id: str, value: Any) -> RlmVariable:
        """Set ``Final``: the answer; the state is complete from then on."""
        return self.rlm_variable_put(state_id, "Final", value)

    @endpoint
    def rlm_mutations(
        self, state_id: str, *, after: int = 0, limit: int | None = None
    ) -> list[RlmMutation]:
        return self._call(
            "GET",
            f"/rlm/states/{_seg(state_id)}/mutations",
            params=_drop_none(after=after, limit=limit),
        )

    @endpoint
    def rlm_checkpoints(self, state_id: str) -> list[RlmCheckpoint]:
        return self._call("GET", f"/rlm/states/{_seg(state_id)}/checkpoints")

    @endpoint
    def rlm_checkpoint_create(
        self, state_id: str, name: str, *, description: str = ""
    ) -> RlmCheckpoint:
        return self._call(
            "POST",
            f"/rlm/states/{_seg(state_id)}/checkpoints",
            json={"name": name, "description": description},
        )

    @endpoint
    def rlm_checkpoint_get(self, state_id: str, checkpoint_id: str) -> RlmCheckpointDetail:
        return self._call("GET", f"/rlm/states/{_seg(state_id)}/checkpoints/{_seg(checkpoint_id)}")

    @endpoint
    def rlm_rollback(self, state_id: str, checkpoint_id: str) -> RlmState:
        return self._call(
            "POST",
            f"/rlm/states/{_seg(state_id)}/rollback",
            json={"checkpoint_id": checkpoint_id},
        )

    # -- context-manager support -------------------------------------------------------

    def current_frame(self, session: Any) -> Frame | None:
        """The innermost open ``frame(...)`` block of ``session`` here (thread or task)."""
        return current_frame(session)


class SyncApi(Api):
    """The base of ``Client``: each endpoint method returns its result."""


class AsyncApi(Api):
    """The base of ``AsyncClient``: each endpoint method returns an awaitable of its result."""


def block_outcome(exc_type: Any, exc: Any) -> dict[str, Any]:
    """How a frame block pops: completed, or failed naming the exception that left it."""
    if exc_type is None:
        return {"status": "completed"}
    words = f"{exc_type.__name__}: {exc}" if str(exc) else exc_type.__name__
    return {"status": "failed", "failure_reason": words[:FAILURE_REASON_MAX]}


def settled_elsewhere(frame: Frame, err: ContextopsError) -> bool:
    """True when popping found the frame closed already (``Final`` of its RLM state, a
    rejected suspension) or suspended (its token resumes it later): nothing to do then."""
    if not isinstance(err, FrameNotActive):
        return False
    status = err.frame_status or ""
    if status in CLOSED_STATUSES or status == "suspended":
        frame.data = {**frame.data, "status": status}
        return True
    return False
