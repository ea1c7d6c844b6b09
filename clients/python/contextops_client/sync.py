"""The synchronous client.

from contextops_client import Client

ops = Client()  # CONTEXTOPS_URL and CONTEXTOPS_API_KEY from the environment
session = ops.session(identity={"user_name": "Ada"}, model="claude-sonnet-4-6")
with ops.frame(session, goal="Summarize the RFC", budget=3000) as frame:
    pack = frame.context_pack(budget_tokens=6000, query="security risks")
    frame.handle("tool_result", content="...", priority="medium")
# popped as completed, or as failed if the block raised
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Literal

import httpx

from ._core import (
    FINISHED_COMPACTION,
    FINISHED_IMPORT,
    MAX_LONG_POLL,
    Frame,
    Suspension,
    SyncApi,
    _stack_pop,
    _stack_push,
    block_outcome,
    current_frame,
    settled_elsewhere,
)
from ._http import DEFAULT_TIMEOUT, RetryPolicy, SyncTransport
from .errors import ContextopsError
from .types import Compaction, ImportJob

logger = logging.getLogger("contextops_client")


class Client(SyncApi):
    """The contextops API over HTTP. ``base_url`` defaults to ``$CONTEXTOPS_URL`` (the
    site, e.g. ``http://127.0.0.1:8000``; a trailing ``/api/v1`` is fine too), ``api_key``
    to ``$CONTEXTOPS_API_KEY``. ``retries``/``backoff`` tune the retry policy (see
    ``contextops_client._http``). Every write carries an ``Idempotency-Key`` so a write
    whose answer was lost is retried and still done once; ``idempotency_keys=False``
    sends none (a POST is then not repeated after a lost answer)."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        retry_on_rate_limit: bool = True,
        idempotency_keys: bool = True,
        http_client: httpx.Client | None = None,
    ) -> None:
        self.transport = SyncTransport(
            base_url,
            api_key,
            timeout=timeout,
            retry=RetryPolicy(
                retries=retries,
                backoff=backoff,
                max_backoff=max_backoff,
                retry_on_rate_limit=retry_on_rate_limit,
            ),
            http_client=http_client,
        )
        self.idempotency_keys = idempotency_keys

    def _call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        timeout: float | None = None,
        wrap: Any = None,
        idempotent: bool = False,
    ) -> Any:
        headers = self._idempotency_headers(method)
        data = self.transport.request(
            method,
            path,
            json=json,
            params=params,
            timeout=timeout,
            idempotent=idempotent or bool(headers),
            headers=headers,
        )
        return wrap(data) if wrap is not None else data

    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- blocks and waits --------------------------------------------------------------

    def frame(
        self,
        session: Any,
        *,
        goal: str,
        budget: int,
        parent: Any = None,
        inputs: dict[str, Any] | None = None,
        max_subframe_depth: int | None = None,
    ) -> FrameBlock:
        """A ``with`` block around a frame: pushed on entry (as a child of the innermost
        open block of the same session unless ``parent`` is given), popped on exit as
        completed, or as failed when the block raised (the exception still propagates)."""
        return FrameBlock(
            self,
            session,
            goal=goal,
            budget=budget,
            parent=parent,
            inputs=inputs,
            max_subframe_depth=max_subframe_depth,
        )

    def suspension_wait(self, suspension: Any, *, timeout: float = 30.0) -> str:
        """Long-poll ``GET /suspensions/{token}?wait=`` until a person decides (or it
        expires, or it is resumed) or ``timeout`` seconds pass; return the status then."""
        if not isinstance(suspension, Suspension):
            suspension = self.suspension_get(suspension)
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            remaining = deadline - time.monotonic()
            wait = round(min(MAX_LONG_POLL, max(0.0, remaining)), 3)
            self.suspension_get(suspension, wait=wait or None)
            if suspension.status != "pending" or remaining <= 0:
                return str(suspension.status)

    def compaction_wait(
        self, compaction: Any, *, timeout: float = 60.0, interval: float = 0.25
    ) -> Compaction:
        """Poll ``GET /compactions/{id}`` until it finished (completed, failed, reverted) or
        ``timeout`` passes; return the run as last seen."""
        deadline = time.monotonic() + timeout
        while True:
            run = self.compaction_get(compaction)
            if run.get("status") in FINISHED_COMPACTION or time.monotonic() >= deadline:
                return run
            time.sleep(interval)

    def import_wait(
        self,
        job: Any,
        *,
        timeout: float = 600.0,
        interval: float = 0.25,
        progress: Callable[[ImportJob], None] | None = None,
    ) -> ImportJob:
        """Poll ``GET /imports/{id}`` until the job completed or failed or ``timeout``
        passes; return it as last seen. ``progress`` is called with every answer."""
        deadline = time.monotonic() + timeout
        while True:
            seen = self.import_get(job)
            if progress is not None:
                progress(seen)
            if seen.get("status") in FINISHED_IMPORT or time.monotonic() >= deadline:
                return seen
            time.sleep(interval)


class FrameBlock:
    """What ``Client.frame(...)`` returns; ``with`` gives the :class:`Frame`."""

    def __init__(self, client: Client, session: Any, **push: Any) -> None:
        self.client = client
        self.session = session
        self.push = push
        self.frame: Frame | None = None
        self._token: Any = None

    def __enter__(self) -> Frame:
        push = dict(self.push)
        if push.get("parent") is None:
            push["parent"] = current_frame(self.session)
        self.frame = self.client.frame_push(self.session, **push)
        self._token = _stack_push(self.frame)
        return self.frame

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        frame = self.frame
        assert frame is not None
        _stack_pop(frame, self._token)
        try:
            self.client.frame_pop(frame, **block_outcome(exc_type, exc))
        except ContextopsError as err:
            if settled_elsewhere(frame, err):
                return False
            if exc_type is None:
                raise
            logger.warning("could not pop frame %s as failed", frame.id, exc_info=True)
        return False


__all__ = ["Client", "FrameBlock"]
