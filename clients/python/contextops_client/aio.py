"""The asynchronous twin of :class:`contextops_client.Client`: the same methods, awaited.

async with AsyncClient() as ops:
    session = await ops.session(model="claude-sonnet-4-6")
    async with ops.frame(session, goal="Summarize the RFC", budget=3000) as frame:
        pack = await frame.context_pack(budget_tokens=6000, query="security risks")
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import httpx

from ._core import (
    FINISHED_COMPACTION,
    FINISHED_IMPORT,
    MAX_LONG_POLL,
    AsyncApi,
    Frame,
    Suspension,
    _stack_pop,
    _stack_push,
    block_outcome,
    current_frame,
    settled_elsewhere,
)
from ._http import DEFAULT_TIMEOUT, AsyncTransport, RetryPolicy
from .errors import ContextopsError
from .types import Compaction, ImportJob

logger = logging.getLogger("contextops_client")


class AsyncClient(AsyncApi):
    """Every endpoint method returns an awaitable; ``frame(...)`` is an ``async with`` block."""

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
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.transport = AsyncTransport(
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

    async def _call(
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
        data = await self.transport.request(
            method,
            path,
            json=json,
            params=params,
            timeout=timeout,
            idempotent=idempotent or bool(headers),
            headers=headers,
        )
        return wrap(data) if wrap is not None else data

    async def aclose(self) -> None:
        await self.transport.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def frame(
        self,
        session: Any,
        *,
        goal: str,
        budget: int,
        parent: Any = None,
        inputs: dict[str, Any] | None = None,
        max_subframe_depth: int | None = None,
    ) -> AsyncFrameBlock:
        """``async with ops.frame(session, goal=..., budget=...) as frame:`` (see Client.frame)."""
        return AsyncFrameBlock(
            self,
            session,
            goal=goal,
            budget=budget,
            parent=parent,
            inputs=inputs,
            max_subframe_depth=max_subframe_depth,
        )

    async def suspension_wait(self, suspension: Any, *, timeout: float = 30.0) -> str:
        if not isinstance(suspension, Suspension):
            suspension = await self.suspension_get(suspension)
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            remaining = deadline - time.monotonic()
            wait = round(min(MAX_LONG_POLL, max(0.0, remaining)), 3)
            await self.suspension_get(suspension, wait=wait or None)
            if suspension.status != "pending" or remaining <= 0:
                return str(suspension.status)

    async def compaction_wait(
        self, compaction: Any, *, timeout: float = 60.0, interval: float = 0.25
    ) -> Compaction:
        deadline = time.monotonic() + timeout
        while True:
            run = await self.compaction_get(compaction)
            if run.get("status") in FINISHED_COMPACTION or time.monotonic() >= deadline:
                return run
            await asyncio.sleep(interval)

    async def import_wait(
        self,
        job: Any,
        *,
        timeout: float = 600.0,
        interval: float = 0.25,
        progress: Callable[[ImportJob], None] | None = None,
    ) -> ImportJob:
        """Poll ``GET /imports/{id}`` until the job completed or failed or ``timeout``
        passes (see Client.import_wait)."""
        deadline = time.monotonic() + timeout
        while True:
            seen = await self.import_get(job)
            if progress is not None:
                progress(seen)
            if seen.get("status") in FINISHED_IMPORT or time.monotonic() >= deadline:
                return seen
            await asyncio.sleep(interval)


class AsyncFrameBlock:
    """What ``AsyncClient.frame(...)`` returns; ``async with`` gives the :class:`Frame`."""

    def __init__(self, client: AsyncClient, session: Any, **push: Any) -> None:
        self.client = client
        self.session = session
        self.push = push
        self.frame: Frame | None = None
        self._token: Any = None

    async def __aenter__(self) -> Frame:
        push = dict(self.push)
        if push.get("parent") is None:
            push["parent"] = current_frame(self.session)
        self.frame = await self.client.frame_push(self.session, **push)
        self._token = _stack_push(self.frame)
        return self.frame

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        frame = self.frame
        assert frame is not None
        _stack_pop(frame, self._token)
        try:
            await self.client.frame_pop(frame, **block_outcome(exc_type, exc))
        except ContextopsError as err:
            if settled_elsewhere(frame, err):
                return False
            if exc_type is None:
                raise
            logger.warning("could not pop frame %s as failed", frame.id, exc_info=True)
        return False


__all__ = ["AsyncClient", "AsyncFrameBlock"]
