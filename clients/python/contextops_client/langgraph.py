"""LangGraph on contextops: a checkpointer that keeps a graph's threads in contextops.

    from contextops_client.langgraph import ContextopsSaver

    saver = ContextopsSaver()  # CONTEXTOPS_URL and CONTEXTOPS_API_KEY from the environment
    graph = builder.compile(checkpointer=saver)
    graph.invoke(inputs, {"configurable": {"thread_id": "ticket-42"}})

Every checkpoint, channel value and pending write goes through the API
(``/api/v1/langgraph``, see docs/api.md) as LangGraph's serializer wrote it, so it comes
back exactly; a JSON rendering of each value goes beside it for the dashboard's thread
page. A thread belongs to a session: ``session=`` names the one new threads go to
(otherwise each new thread starts a session of its own). Needs the ``langgraph`` extra
(``pip install contextops-client[langgraph]``).
"""

from __future__ import annotations

import asyncio
import base64
import builtins
import dataclasses
import json
import math
import random
import time
import uuid
from collections.abc import AsyncIterator, Generator, Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import quote, unquote

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

try:  # LangGraph itself (not only its checkpoint package): what a graph resumes with
    from langgraph.types import Command
except ImportError:  # pragma: no cover - the saver and the store work without it
    Command = None  # type: ignore[assignment,misc]

# LangGraph's own rules for namespace conditions and value filters, as its in-memory
# store applies them: the same answers here as there.
from langgraph.store.memory import _compare_values, _does_match

from ._core import _id, _seg
from .aio import AsyncClient
from .errors import NotFound
from .sync import Client

PAGE = 1000  # the most checkpoints one GET answers
PREVIEW_TEXT = 2000
PREVIEW_ITEMS = 100
EMPTY = "empty"  # a channel that has a version but no value
# How long a step's writes wait for their thread's first checkpoint (see put_writes).
CHECKPOINT_WAIT = 5.0


def preview(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON the dashboard can show: long texts cut, objects by their fields."""
    if depth > 8:
        return "…"
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, str):
        return value if len(value) <= PREVIEW_TEXT else value[:PREVIEW_TEXT] + "…"
    if isinstance(value, bytes | bytearray):
        return f"<{len(value)} bytes>"
    if isinstance(value, dict):
        items = list(value.items())[:PREVIEW_ITEMS]
        return {str(k): preview(v, depth + 1) for k, v in items}
    if isinstance(value, list | tuple | set | frozenset):
        return [preview(v, depth + 1) for v in list(value)[:PREVIEW_ITEMS]]
    if hasattr(value, "model_dump"):
        try:
            return preview(value.model_dump(), depth + 1)
        except Exception:  # a model that cannot dump itself is still shown by its repr
            pass
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return preview(
            {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}, depth + 1
        )
    text = repr(value)
    return text if len(text) <= PREVIEW_TEXT else text[:PREVIEW_TEXT] + "…"


def _encode(typed: tuple[str, bytes | None]) -> dict[str, str]:
    kind, data = typed
    return {"type": kind, "data": base64.b64encode(data or b"").decode("ascii")}


def _json_metadata(metadata: Any) -> dict[str, Any]:
    """The metadata as JSON for the server's filters (the exact value travels as a blob)."""
    encoded: dict[str, Any] = json.loads(json.dumps(metadata, default=lambda v: preview(v)))
    return encoded


def _checkpoint_waits(seconds: float) -> Iterator[float | None]:
    """The pauses before each new try of writes whose thread is not stored yet, growing
    from 10 ms to 250 ms within ``seconds``; then None: the last try's 404 stands."""
    deadline = time.monotonic() + seconds
    pause = 0.01
    while time.monotonic() + pause < deadline:
        yield pause
        pause = min(pause * 2, 0.25)
    yield None


def _configurable(config: RunnableConfig) -> dict[str, Any]:
    return dict(config.get("configurable") or {})


def _decision_command(suspension: dict[str, Any]) -> Command[Any]:
    """LangGraph's ``Command(resume=...)`` for a decided suspension."""
    if Command is None:
        raise RuntimeError("interrupt decisions need LangGraph itself: pip install langgraph")
    status = suspension.get("status")
    note = suspension.get("decision_note") or ("expired" if status == "expired" else "")
    return Command(
        resume={
            "approved": status in ("approved", "resumed"),
            "note": note,
            "decided_by": suspension.get("decided_by"),
        }
    )


# One API call of the store's work: (method, path, query parameters, JSON body); the
# generator receives its answer.
_Call = tuple[str, str, dict[str, Any] | None, dict[str, Any] | None]


class ContextopsSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer over the contextops API, synchronous and asynchronous.

    ``url`` and ``api_key`` default to ``$CONTEXTOPS_URL`` and ``$CONTEXTOPS_API_KEY``;
    ``client`` / ``async_client`` reuse clients you already hold. ``session`` (a session
    or its id) is where threads this saver starts belong. ``checkpoint_wait`` is how many
    seconds a task's writes wait for the first checkpoint of their thread to be stored.
    """

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        session: Any = None,
        client: Client | None = None,
        async_client: AsyncClient | None = None,
        serde: SerializerProtocol | None = None,
        checkpoint_wait: float = CHECKPOINT_WAIT,
        **client_options: Any,
    ) -> None:
        super().__init__(serde=serde)
        self.checkpoint_wait = checkpoint_wait
        self._url, self._api_key, self._options = url, api_key, client_options
        self._client = client
        self._async_client = async_client
        self.session_id = _id(session) if session is not None else None

    # -- clients -----------------------------------------------------------------------

    @property
    def client(self) -> Client:
        if self._client is None:
            self._client = Client(self._url, self._api_key, **self._options)
        return self._client

    @property
    def async_client(self) -> AsyncClient:
        if self._async_client is None:
            self._async_client = AsyncClient(self._url, self._api_key, **self._options)
        return self._async_client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    async def aclose(self) -> None:
        if self._async_client is not None:
            await self._async_client.aclose()

    # -- channel versions --------------------------------------------------------------

    def get_next_version(self, current: str | int | None, channel: None = None) -> str:
        """The version after ``current``: its number plus one, then a random part, as
        LangGraph's in-memory and PostgreSQL savers write it. A fork from a past
        checkpoint counts up from that checkpoint's versions, so a plain number would
        name again a version the thread already stored (and a value it held then);
        the random part keeps every version of a thread distinct, and the numbers keep
        them ordered. A thread saved before with whole-number versions keeps counting so:
        LangGraph compares a checkpoint's versions with each other, and a number and a
        text cannot be compared."""
        if isinstance(current, int):
            return current + 1  # type: ignore[return-value]
        number = 0 if current is None else int(str(current).split(".")[0])
        return f"{number + 1:032}.{random.random():016}"

    # -- the wire format ---------------------------------------------------------------

    def _put_body(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> tuple[dict[str, Any], RunnableConfig]:
        conf = _configurable(config)
        thread_id = str(conf["thread_id"])
        checkpoint_ns = conf.get("checkpoint_ns") or ""
        rest: dict[str, Any] = dict(checkpoint)
        values: dict[str, Any] = rest.pop("channel_values", None) or {}
        blobs = []
        for channel, version in new_versions.items():
            if channel in values:
                typed = self.serde.dumps_typed(values[channel])
                shown = preview(values[channel])
            else:
                typed, shown = (EMPTY, b""), None
            blobs.append(
                {"channel": channel, "version": str(version), **_encode(typed), "preview": shown}
            )
        full_metadata = get_serializable_checkpoint_metadata(config, metadata)
        body: dict[str, Any] = {
            "thread_id": thread_id,
            "checkpoint_ns": checkpoint_ns,
            "checkpoint_id": checkpoint["id"],
            "parent_checkpoint_id": conf.get("checkpoint_id"),
            "checkpoint": _encode(self.serde.dumps_typed(rest)),
            "channel_versions": dict(checkpoint.get("channel_versions") or {}),
            "blobs": blobs,
            "metadata": _json_metadata(full_metadata),
            "metadata_blob": _encode(self.serde.dumps_typed(full_metadata)),
        }
        if self.session_id is not None:
            body["session_id"] = self.session_id
        saved: RunnableConfig = {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": checkpoint["id"],
            }
        }
        return body, saved

    def _writes_body(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> dict[str, Any]:
        conf = _configurable(config)
        body: dict[str, Any] = {
            "thread_id": str(conf["thread_id"]),
            "checkpoint_ns": conf.get("checkpoint_ns") or "",
            "checkpoint_id": conf["checkpoint_id"],
            "task_id": task_id,
            "task_path": task_path,
            "writes": [
                {
                    "idx": WRITES_IDX_MAP.get(channel, idx),
                    "channel": channel,
                    **_encode(self.serde.dumps_typed(value)),
                    "preview": preview(value),
                }
                for idx, (channel, value) in enumerate(writes)
            ],
        }
        if self.session_id is not None:
            body["session_id"] = self.session_id
        return body

    def _loads(self, blob: dict[str, Any]) -> Any:
        return self.serde.loads_typed((blob["type"], base64.b64decode(blob["data"])))

    def _tuple(self, item: dict[str, Any]) -> CheckpointTuple:
        checkpoint = self._loads(item["checkpoint"])
        checkpoint["channel_values"] = {
            value["channel"]: self._loads(value)
            for value in item["channel_values"]
            if value["type"] != EMPTY
        }
        metadata = (
            self._loads(item["metadata_blob"]) if item.get("metadata_blob") else item["metadata"]
        )
        where = {"thread_id": item["thread_id"], "checkpoint_ns": item["checkpoint_ns"]}
        parent = item.get("parent_checkpoint_id")
        return CheckpointTuple(
            config={"configurable": {**where, "checkpoint_id": item["checkpoint_id"]}},
            checkpoint=checkpoint,
            metadata=metadata,
            parent_config={"configurable": {**where, "checkpoint_id": parent}} if parent else None,
            pending_writes=[
                (w["task_id"], w["channel"], self._loads(w)) for w in item["pending_writes"]
            ],
        )

    @staticmethod
    def _list_params(
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
    ) -> dict[str, Any]:
        params: dict[str, Any] = {}
        if config is not None:
            conf = _configurable(config)
            if conf.get("thread_id") is not None:
                params["thread_id"] = str(conf["thread_id"])
            if conf.get("checkpoint_ns") is not None:
                params["checkpoint_ns"] = conf["checkpoint_ns"]
            if conf.get("checkpoint_id"):
                params["checkpoint_id"] = conf["checkpoint_id"]
        if filter:
            params["metadata"] = json.dumps(filter)
        if before is not None and get_checkpoint_id(before):
            params["before"] = get_checkpoint_id(before)
        return params

    @staticmethod
    def _get_params(config: RunnableConfig) -> dict[str, Any]:
        conf = _configurable(config)
        params = {
            "thread_id": str(conf["thread_id"]),
            "checkpoint_ns": conf.get("checkpoint_ns") or "",
            "limit": 1,
        }
        if get_checkpoint_id(config):
            params["checkpoint_id"] = get_checkpoint_id(config)
        return params

    # -- synchronous -------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        items = self.client.request(
            "GET", "/langgraph/checkpoints", params=self._get_params(config)
        )
        return self._tuple(items["items"][0]) if items["items"] else None

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        params = self._list_params(config, filter, before)
        left = limit
        while left is None or left > 0:
            page = min(PAGE, left) if left is not None else PAGE
            items = self.client.request(
                "GET", "/langgraph/checkpoints", params={**params, "limit": page}
            )["items"]
            for item in items:
                yield self._tuple(item)
            if len(items) < page:
                return
            left = left - len(items) if left is not None else None
            params["before"] = items[-1]["checkpoint_id"]

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        body, saved = self._put_body(config, checkpoint, metadata, new_versions)
        self.client.request("POST", "/langgraph/checkpoints", json=body)
        return saved

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's writes. The server refuses (404) writes to a thread it does not
        hold, and LangGraph's async and exit durability send a step's writes beside the
        checkpoint they belong to; so a 404 is tried again until that checkpoint lands,
        for ``checkpoint_wait`` seconds, and raised after."""
        body = self._writes_body(config, writes, task_id, task_path)
        for pause in _checkpoint_waits(self.checkpoint_wait):
            try:
                self.client.request("POST", "/langgraph/writes", json=body)
                return
            except NotFound:
                if pause is None:
                    raise
            time.sleep(pause)

    def delete_thread(self, thread_id: str) -> None:
        try:
            self.client.request("DELETE", f"/langgraph/threads/{_seg(thread_id)}")
        except NotFound:
            pass  # nothing stored for it: already as asked

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self.client.request("POST", "/langgraph/runs/delete", json={"run_ids": list(run_ids)})

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self.client.request(
            "POST",
            f"/langgraph/threads/{_seg(source_thread_id)}/copy",
            json={"target_thread_id": str(target_thread_id)},
        )

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self.client.request(
            "POST",
            "/langgraph/threads/prune",
            json={"thread_ids": [str(t) for t in thread_ids], "strategy": strategy},
        )

    # -- interrupts: a person decides in the approval inbox ----------------------------

    # ``builtins.list``: in this class, ``list`` is the checkpoint listing above.
    def interrupts(self, config: RunnableConfig) -> builtins.list[dict[str, Any]]:
        """The thread's interrupts, newest first (``GET .../interrupts``)."""
        thread_id = _seg(_configurable(config)["thread_id"])
        answer = self.client.request("GET", f"/langgraph/threads/{thread_id}/interrupts")
        items: builtins.list[dict[str, Any]] = answer["items"]
        return items

    def interrupt_decision(self, config: RunnableConfig, *, timeout: float = 30.0) -> Any:
        """Wait up to ``timeout`` seconds for a person to decide the thread's latest
        interrupt in the approval inbox; return what the graph continues with:

            Command(resume={"approved": True | False, "note": "...", "decided_by": "grace"})

        (an expired interrupt is ``approved: False`` with note ``"expired"``), or None while
        nobody has decided or when the thread has no interrupt. An approval resumes the
        interrupt's frame and closes it as completed; a rejection has failed it already.
        """
        found = self.interrupts(config)
        if not found:
            return None
        status = self.client.suspension_wait(found[0]["token"], timeout=timeout)
        if status == "pending":
            return None
        seen = self.client.suspension_get(found[0]["token"])
        if status == "approved":
            frame = self.client.suspension_resume(seen)
            self.client.frame_pop(frame, status="completed")
        return _decision_command(seen.data)

    async def ainterrupts(self, config: RunnableConfig) -> builtins.list[dict[str, Any]]:
        thread_id = _seg(_configurable(config)["thread_id"])
        answer = await self.async_client.request(
            "GET", f"/langgraph/threads/{thread_id}/interrupts"
        )
        items: builtins.list[dict[str, Any]] = answer["items"]
        return items

    async def ainterrupt_decision(self, config: RunnableConfig, *, timeout: float = 30.0) -> Any:
        """:meth:`interrupt_decision`, awaited."""
        found = await self.ainterrupts(config)
        if not found:
            return None
        status = await self.async_client.suspension_wait(found[0]["token"], timeout=timeout)
        if status == "pending":
            return None
        seen = await self.async_client.suspension_get(found[0]["token"])
        if status == "approved":
            frame = await self.async_client.suspension_resume(seen)
            await self.async_client.frame_pop(frame, status="completed")
        return _decision_command(seen.data)

    # -- asynchronous ------------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        items = await self.async_client.request(
            "GET", "/langgraph/checkpoints", params=self._get_params(config)
        )
        return self._tuple(items["items"][0]) if items["items"] else None

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        params = self._list_params(config, filter, before)
        left = limit
        while left is None or left > 0:
            page = min(PAGE, left) if left is not None else PAGE
            answer = await self.async_client.request(
                "GET", "/langgraph/checkpoints", params={**params, "limit": page}
            )
            items = answer["items"]
            for item in items:
                yield self._tuple(item)
            if len(items) < page:
                return
            left = left - len(items) if left is not None else None
            params["before"] = items[-1]["checkpoint_id"]

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        body, saved = self._put_body(config, checkpoint, metadata, new_versions)
        await self.async_client.request("POST", "/langgraph/checkpoints", json=body)
        return saved

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """``put_writes``, on the event loop."""
        body = self._writes_body(config, writes, task_id, task_path)
        for pause in _checkpoint_waits(self.checkpoint_wait):
            try:
                await self.async_client.request("POST", "/langgraph/writes", json=body)
                return
            except NotFound:
                if pause is None:
                    raise
            await asyncio.sleep(pause)

    async def adelete_thread(self, thread_id: str) -> None:
        try:
            await self.async_client.request("DELETE", f"/langgraph/threads/{_seg(thread_id)}")
        except NotFound:
            pass  # nothing stored for it: already as asked

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self.async_client.request(
            "POST", "/langgraph/runs/delete", json={"run_ids": list(run_ids)}
        )

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self.async_client.request(
            "POST",
            f"/langgraph/threads/{_seg(source_thread_id)}/copy",
            json={"target_thread_id": str(target_thread_id)},
        )

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await self.async_client.request(
            "POST",
            "/langgraph/threads/prune",
            json={"thread_ids": [str(t) for t in thread_ids], "strategy": strategy},
        )


# -- the store ---------------------------------------------------------------------------

STORE_SCOPE = "task"
STORE_SCOPE_ID = "langgraph-store"
STORE_SOURCE = "langgraph"
FACT_PAGE = 500


def store_subject(namespace: tuple[str, ...], key: str) -> str:
    """The fact subject of ``key`` in ``namespace``: ``lg:<label>.<label>:<key>``, each
    part percent-encoded (so ``.``, ``:`` and ``/`` in them stay unambiguous)."""
    labels = ".".join(quote(label, safe="") for label in namespace)
    return f"lg:{labels}:{quote(key, safe='')}"


def _store_place(subject: str) -> tuple[tuple[str, ...], str] | None:
    if not subject.startswith("lg:"):
        return None
    labels, _, key = subject[3:].rpartition(":")
    namespace = tuple(unquote(label) for label in labels.split(".")) if labels else ()
    return namespace, unquote(key)


class ContextopsStore(BaseStore):
    """A LangGraph store over contextops facts (organization-wide, ``task`` scope
    ``langgraph-store``).

    A (namespace, key) is a fact subject (``store_subject``); each put writes a new
    version of it that supersedes the one before, so the fact's lineage page shows the
    item's history; a delete invalidates the current version. ``search`` filters by
    namespace prefix and by value fields (``{"status": "open"}``, or operators
    ``$eq $ne $gt $gte $lt $lte``); there is no vector index (``query`` is ignored).
    """

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        client: Client | None = None,
        async_client: AsyncClient | None = None,
        **client_options: Any,
    ) -> None:
        self._url, self._api_key, self._options = url, api_key, client_options
        self._client = client
        self._async_client = async_client

    @property
    def client(self) -> Client:
        if self._client is None:
            self._client = Client(self._url, self._api_key, **self._options)
        return self._client

    @property
    def async_client(self) -> AsyncClient:
        if self._async_client is None:
            self._async_client = AsyncClient(self._url, self._api_key, **self._options)
        return self._async_client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    async def aclose(self) -> None:
        if self._async_client is not None:
            await self._async_client.aclose()

    # The work, written once as generators of requests: each ``yield`` is one API call
    # (method, path, params, json) and receives its answer, so the synchronous and the
    # asynchronous store share every rule.

    def _facts(self, subject: str | None = None) -> Generator[_Call, Any, list[dict[str, Any]]]:
        """Every valid fact of the store's scope (``subject``'s alone, given one); a search
        and the namespaces read them all and keep what they want, as ``GET /facts``
        filters by exact subject only."""
        offset = 0
        found: list[dict[str, Any]] = []
        while True:
            params: dict[str, Any] = {
                "scope": STORE_SCOPE,
                "scope_id": STORE_SCOPE_ID,
                "valid": "true",
                "limit": FACT_PAGE,
                "offset": offset,
            }
            if subject is not None:
                params["subject"] = subject
            answer = yield ("GET", "/facts", params, None)
            found.extend(answer["items"])
            if answer.get("next_offset") is None:
                return found
            offset = answer["next_offset"]

    @staticmethod
    def _item(fact: dict[str, Any], cls: type[Item] = Item) -> Item | None:
        place = _store_place(fact.get("subject") or "")
        if place is None or not isinstance(fact.get("value"), dict):
            return None
        # The time of the put that wrote this version, as LangGraph's in-memory store
        # dates an item: the same on every read of it.
        when = datetime.fromisoformat(fact["timestamp"])
        return cls(
            value=fact["value"], key=place[1], namespace=place[0], created_at=when, updated_at=when
        )

    def _get(self, op: GetOp) -> Generator[_Call, Any, Item | None]:
        facts = yield from self._facts(subject=store_subject(op.namespace, op.key))
        return self._item(facts[0]) if facts else None

    def _put(self, op: PutOp) -> Generator[_Call, Any, None]:
        subject = store_subject(op.namespace, op.key)
        current = yield from self._facts(subject=subject)
        if op.value is None:
            for fact in current:
                yield ("POST", f"/facts/{_seg(fact['key'])}/invalidate", None, {})
            return None
        body: dict[str, Any] = {
            "key": f"{subject}_v{uuid.uuid4().hex[:12]}",
            "subject": subject,
            "value": dict(op.value),
            "source": STORE_SOURCE,
            "scope": STORE_SCOPE,
            "scope_id": STORE_SCOPE_ID,
        }
        if current:
            body["supersedes"] = current[0]["key"]
        yield ("POST", "/facts", None, body)
        return None

    def _search(self, op: SearchOp) -> Generator[_Call, Any, list[Item]]:
        facts = yield from self._facts()
        items: list[Item] = []
        for fact in facts:
            item = self._item(fact, SearchItem)
            if item is None or item.namespace[: len(op.namespace_prefix)] != op.namespace_prefix:
                continue
            if op.filter and not all(
                _compare_values(item.value.get(k), v) for k, v in op.filter.items()
            ):
                continue
            items.append(item)
        items.sort(key=lambda i: i.updated_at, reverse=True)
        return items[op.offset : op.offset + op.limit]

    def _namespaces(self, op: ListNamespacesOp) -> Generator[_Call, Any, list[tuple[str, ...]]]:
        facts = yield from self._facts()
        found: set[tuple[str, ...]] = set()
        for fact in facts:
            item = self._item(fact)
            if item is None:
                continue
            namespace = item.namespace
            if op.match_conditions and not all(
                _does_match(c, namespace) for c in op.match_conditions
            ):
                continue
            found.add(namespace[: op.max_depth] if op.max_depth is not None else namespace)
        return sorted(found)[op.offset : op.offset + op.limit]

    def _work(self, op: Op) -> Generator[_Call, Any, Result]:
        if isinstance(op, GetOp):
            return self._get(op)
        if isinstance(op, PutOp):
            return self._put(op)
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._namespaces(op)
        raise TypeError(f"Unknown store operation {op!r}")

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        results: list[Result] = []
        for op in ops:
            work = self._work(op)
            answer = None
            try:
                while True:
                    method, path, params, body = work.send(answer)
                    answer = self.client.request(method, path, params=params, json=body)
            except StopIteration as done:
                results.append(done.value)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        results: list[Result] = []
        for op in ops:
            work = self._work(op)
            answer = None
            try:
                while True:
                    method, path, params, body = work.send(answer)
                    answer = await self.async_client.request(method, path, params=params, json=body)
            except StopIteration as done:
                results.append(done.value)
        return results


__all__ = ["ContextopsSaver", "ContextopsStore", "preview", "store_subject"]
