"""A bounded asyncio load generator: N concurrent agents working the API for T seconds.

Each agent starts a session and a root frame, then loops (at least once, then until the
deadline): push a child frame, record two model calls on it, write a fact and supersede
it, assemble a context pack, pop the child. With ``jobs`` it also appends a model call's
messages to the conversation, adds a document handle to its root frame and queues its
page-out each round, queues a compaction every third round from the first (when its last
one has finished) and, one agent in three, imports a Claude Code transcript every sixth
round; the jobs are polled to their end after the load stops (``jobs_drain``).

Every write carries an ``Idempotency-Key`` and is retried the way the Python client
retries (clients/python/contextops_client/_http.py, its own transport and policy): the
same key and body, backoff, through connection errors, 503s and 502/504s, 409
``idempotency_key_in_use`` and 429. A request counts as an error only when its retries
ran out. Every write answered 2xx is recorded (``Acknowledged``) so that
tests/load/main.py can look for each one in the database afterwards.

Every request's latency (retries included) is kept per operation. The figures are what
`make load` prints and what docs/benchmarks.md records.
"""

import asyncio
import random
import statistics
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contextops_client._http import AsyncTransport, RetryPolicy
from contextops_client.errors import ContextopsError

TRANSCRIPT = (
    Path(__file__).resolve().parents[1]
    / "fixtures/transcripts/claude-code/claude-code-viewer/1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"
)
# Long enough to ride out a restart of PostgreSQL or Redis on a busy machine, and 409
# idempotency_key_in_use (at Retry-After: 1) while a first copy still runs: 0.25 s
# doubling to 4 s, about 110 s in all.
RETRY = RetryPolicy(retries=30, backoff=0.25, max_backoff=4.0)


@dataclass
class Acknowledged:
    """What the server said it wrote (a 2xx answer), to look for afterwards."""

    sessions: list[str] = field(default_factory=list)
    frames: list[str] = field(default_factory=list)
    popped: list[str] = field(default_factory=list)
    usage: list[str] = field(default_factory=list)  # message ids
    facts: list[tuple[str, str]] = field(default_factory=list)  # (session id, fact key)
    handles: list[str] = field(default_factory=list)
    turns: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # session: appends

    def count(self) -> int:
        return (
            len(self.sessions)
            + len(self.frames)
            + len(self.popped)
            + len(self.usage)
            + len(self.facts)
            + len(self.handles)
            + sum(self.turns.values())
        )


@dataclass
class Jobs:
    """The jobs the agents queued (202 answers), by kind, and what became of them."""

    # (job id, the index of the agent that queued it: its key reads it)
    compactions: list[tuple[str, int]] = field(default_factory=list)
    page_outs: list[tuple[str, int]] = field(default_factory=list)  # handle ids
    imports: list[tuple[str, int]] = field(default_factory=list)
    status: dict[str, str] = field(default_factory=dict)  # job id: last status seen
    sessions: dict[str, str] = field(default_factory=dict)  # page-out handle: its session

    @property
    def queued(self) -> int:
        return len(self.compactions) + len(self.page_outs) + len(self.imports)

    def all(self) -> list[tuple[str, int]]:
        return [*self.compactions, *self.page_outs, *self.imports]

    def completed(self) -> int:
        return sum(
            1 for job_id, _ in self.all() if self.status.get(job_id) in ("completed", "indexed")
        )


@dataclass
class LoadResult:
    agents: int
    seconds: float
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    retries: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    unexpected: list[str] = field(default_factory=list)
    sessions: list[str] = field(default_factory=list)
    acknowledged: Acknowledged = field(default_factory=Acknowledged)
    jobs: Jobs = field(default_factory=Jobs)

    @property
    def requests(self) -> int:
        return sum(len(v) for v in self.latencies.values())

    def table(self) -> str:
        lines = [
            f"{self.agents} agents for {self.seconds:.0f} s: {self.requests} requests, "
            f"{self.requests / self.seconds:.0f} requests/s, {sum(self.errors.values())} errors",
            "",
            "| operation | count | per second | p50 ms | p95 ms | p99 ms | retries | errors |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for name in sorted(self.latencies):
            samples = sorted(self.latencies[name])
            if not samples:
                continue

            def pct(p, samples=samples):
                return samples[min(len(samples) - 1, int(len(samples) * p))] * 1000

            lines.append(
                f"| {name} | {len(samples)} | {len(samples) / self.seconds:.1f} | "
                f"{statistics.median(samples) * 1000:.1f} | {pct(0.95):.1f} | {pct(0.99):.1f} | "
                f"{self.retries.get(name, 0)} | {self.errors.get(name, 0)} |"
            )
        return "\n".join(lines)

    def p95_ms(self) -> float:
        samples = sorted(s for values in self.latencies.values() for s in values)
        if not samples:
            return 0.0
        return samples[min(len(samples) - 1, int(len(samples) * 0.95))] * 1000


class _Transport(AsyncTransport):
    """The Python client's transport, counting the retries it makes per operation."""

    def __init__(self, *args, result: LoadResult, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.result = result
        self.operation = ""

    def _wait_for(self, method, outcome, attempt, idempotent=False):
        wait = super()._wait_for(method, outcome, attempt, idempotent)
        if wait is not None:
            self.result.retries[self.operation] += 1
        return wait


WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


async def _call(api: _Transport, result, name, method, path, json=None) -> Any:
    """One request as the client sends it: a write with a fresh Idempotency-Key, the same
    on each retry. None when it failed after its retries (counted as an error)."""
    headers = {"Idempotency-Key": str(uuid.uuid4())} if method in WRITES else {}
    started = time.perf_counter()
    api.operation = name
    try:
        answer = await api.request(
            method, path, json=json, headers=headers, idempotent=bool(headers)
        )
    except ContextopsError as error:
        result.errors[name] += 1
        result.unexpected.append(f"{name}: {error}"[:300])
        return None
    result.latencies[name].append(time.perf_counter() - started)
    return answer


def _transcript() -> tuple[str, str]:
    """A file name of its own (Claude Code names a session's file by its id) and the text."""
    return f"{uuid.uuid4()}.jsonl", TRANSCRIPT.read_text()


async def _agent(index, base_url, key, deadline, result, jobs):
    api = _Transport(base_url, key, timeout=30, retry=RETRY, result=result)
    acked = result.acknowledged
    try:
        session = await _call(
            api,
            result,
            "session.create",
            "POST",
            "/sessions",
            json={"identity": {"user_name": f"load-{index}"}, "context_window_tokens": 200_000},
        )
        if session is None:
            return
        session_id = session["id"]
        result.sessions.append(session_id)
        acked.sessions.append(session_id)
        root = await _call(
            api,
            result,
            "frame.push",
            "POST",
            f"/sessions/{session_id}/frames",
            json={"goal": f"Load agent {index}", "budget": {"total": 10**8}},
        )
        if root is None:
            return
        acked.frames.append(root["id"])
        compaction: str | None = None
        round_ = 0
        # At least one round each, however long the start took on a busy machine.
        while round_ == 0 or time.monotonic() < deadline:
            round_ += 1
            child = await _call(
                api,
                result,
                "frame.push",
                "POST",
                f"/sessions/{session_id}/frames",
                json={
                    "goal": f"Step {round_}",
                    "parent_frame_id": root["id"],
                    "budget": {"total": 50_000},
                },
            )
            if child is None:
                continue
            acked.frames.append(child["id"])
            for call in range(2):
                message_id = f"msg_load_{index}_{round_}_{call}_{uuid.uuid4().hex[:8]}"
                if await _call(
                    api,
                    result,
                    "usage.record",
                    "POST",
                    f"/frames/{child['id']}/usage",
                    json={
                        "input_tokens": 120,
                        "output_tokens": 40,
                        "cache_read_input_tokens": 900,
                        "message_id": message_id,
                    },
                ):
                    acked.usage.append(message_id)
            key_name = f"load_{index}_{round_}"
            if await _call(
                api,
                result,
                "fact.write",
                "POST",
                "/facts",
                json={
                    "key": key_name,
                    "subject": f"agent{index}.status",
                    "value": f"step {round_}",
                    "source": "user",
                },
            ):
                acked.facts.append((session_id, key_name))
            if await _call(
                api,
                result,
                "fact.supersede",
                "POST",
                "/facts",
                json={
                    "key": key_name + "_b",
                    "subject": f"agent{index}.status",
                    "value": f"step {round_} done",
                    "source": "user",
                    "supersedes": key_name,
                },
            ):
                acked.facts.append((session_id, key_name + "_b"))
            if jobs:
                compaction = await _jobs_round(
                    api, result, index, round_, session_id, root["id"], compaction
                )
            await _call(
                api,
                result,
                "context_pack",
                "POST",
                f"/sessions/{session_id}/context-pack",
                json={"frame_id": child["id"], "budget_tokens": 4000, "query": "status"},
            )
            if await _call(
                api,
                result,
                "frame.pop",
                "POST",
                f"/frames/{child['id']}/pop",
                json={"status": "completed"},
            ):
                acked.popped.append(child["id"])
    finally:
        await api.aclose()


async def _jobs_round(api, result, index, round_, session_id, root_id, compaction):
    """This round's conversation, handle and jobs; returns the agent's open compaction."""
    acked, queued = result.acknowledged, result.jobs
    if await _call(
        api,
        result,
        "messages.append",
        "POST",
        f"/sessions/{session_id}/messages",
        json={
            "messages": [
                {
                    "role": "user",
                    "content": f"Round {round_}: what is the status of step {round_}?",
                },
                {
                    "role": "assistant",
                    "content": f"Step {round_} is done; the facts say so. " * 20,
                },
            ],
            "frame_id": root_id,
        },
    ):
        acked.turns[session_id] += 1
    handle = await _call(
        api,
        result,
        "handle.add",
        "POST",
        f"/frames/{root_id}/handles",
        json={
            "kind": "document",
            "priority": "low",
            "content": f"Notes of agent {index}, round {round_}. " * 40,
        },
    )
    if handle is not None:
        acked.handles.append(handle["id"])
        if await _call(api, result, "page_out", "POST", f"/handles/{handle['id']}/page-out"):
            queued.page_outs.append((handle["id"], index))
            queued.sessions[handle["id"]] = session_id
    if round_ % 3 == 1:
        if compaction is not None:
            run = await _call(api, result, "compaction.get", "GET", f"/compactions/{compaction}")
            if run is not None and run["status"] in ("queued", "running"):
                return compaction  # one at a time per session
        run = await _call(
            api,
            result,
            "compaction",
            "POST",
            f"/sessions/{session_id}/compactions",
            json={"strategy": "summarize_oldest", "keep_turns": 1},
        )
        if run is not None:
            queued.compactions.append((run["id"], index))
            compaction = run["id"]
    if index % 3 == 0 and round_ % 6 == 1:
        file_name, text = _transcript()
        job = await _call(
            api,
            result,
            "import",
            "POST",
            "/imports",
            json={"file_name": file_name, "content": text},
        )
        if job is not None:
            queued.imports.append((job["id"], index))
    return compaction


async def jobs_drain(*, base_url: str, keys: list[str], result: LoadResult, seconds: float) -> None:
    """Poll every queued job until it finished or ``seconds`` passed: compactions and
    imports by their status; page-outs by their session's events, where the job's
    ``handle.paged_out`` names the handle (its state is then ``indexed``)."""
    queued = result.jobs
    paths = [(f"/compactions/{i}", i, "status", a) for i, a in queued.compactions] + [
        (f"/imports/{i}", i, "status", a) for i, a in queued.imports
    ]
    sessions = {(queued.sessions[i], a) for i, a in queued.page_outs}
    read_through: dict[str, int] = {}
    apis = {
        a: _Transport(base_url, key, timeout=30, retry=RETRY, result=result)
        for a, key in enumerate(keys)
    }
    deadline = time.monotonic() + seconds
    try:
        while True:
            pending = [
                p
                for p in paths
                if queued.status.get(p[1]) not in ("completed", "indexed", "failed")
            ]
            paging = {
                (session_id, a)
                for session_id, a in sessions
                if any(
                    queued.sessions[h] == session_id and queued.status.get(h) != "indexed"
                    for h, _ in queued.page_outs
                )
            }
            if not (pending or paging) or time.monotonic() > deadline:
                return
            for session_id, agent in paging:
                while True:
                    after = read_through.get(session_id, 0)
                    try:
                        events = await apis[agent].request(
                            "GET", f"/sessions/{session_id}/events?after={after}&limit=1000"
                        )
                    except ContextopsError:
                        break
                    for event in events:
                        if event["type"] == "handle.paged_out":
                            queued.status[str(event["payload"]["handle_id"])] = "indexed"
                    if not events:
                        break
                    read_through[session_id] = events[-1]["seq"]
            for path, job_id, attribute, agent in pending:
                try:
                    answer = await apis[agent].request("GET", path)
                except ContextopsError as error:
                    queued.status[job_id] = f"unreadable: {error}"[:200]
                    continue
                queued.status[job_id] = answer[attribute]
            await asyncio.sleep(0.5 + random.random() * 0.5)
    finally:
        for api in apis.values():
            await api.aclose()


async def run_load(
    *, base_url: str, keys: list[str], seconds: float, jobs: bool = False
) -> LoadResult:
    result = LoadResult(agents=len(keys), seconds=seconds)
    deadline = time.monotonic() + seconds
    await asyncio.gather(
        *(_agent(i, base_url, key, deadline, result, jobs) for i, key in enumerate(keys))
    )
    return result
