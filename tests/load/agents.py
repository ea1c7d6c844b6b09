"""A bounded asyncio load generator: N concurrent agents working the API for T seconds.

Each agent starts a session and a root frame, then loops: push a child frame, record two
model calls on it, write a fact and supersede it, assemble a context pack, pop the child.
Every request's latency is kept per operation; any 5xx or transport error is counted.
The figures are what `make load` prints and what docs/benchmarks.md records.
"""

import asyncio
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass, field

import httpx


@dataclass
class LoadResult:
    agents: int
    seconds: float
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    unexpected: list[str] = field(default_factory=list)
    sessions: list[str] = field(default_factory=list)

    @property
    def requests(self) -> int:
        return sum(len(v) for v in self.latencies.values())

    def table(self) -> str:
        lines = [
            f"{self.agents} agents for {self.seconds:.0f} s: {self.requests} requests, "
            f"{self.requests / self.seconds:.0f} requests/s, {sum(self.errors.values())} errors",
            "",
            "| operation | count | per second | p50 ms | p95 ms | p99 ms | errors |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for name in sorted(self.latencies):
            samples = sorted(self.latencies[name])
            if not samples:
                continue

            def pct(p, samples=samples):
                return samples[min(len(samples) - 1, int(len(samples) * p))] * 1000

            lines.append(
                f"| {name} | {len(samples)} | {len(samples) / self.seconds:.1f} | "
                f"{statistics.median(samples) * 1000:.1f} | {pct(0.95):.1f} | {pct(0.99):.1f} | {self.errors.get(name, 0)} |"
            )
        return "\n".join(lines)


async def _call(client, result, name, method, path, expected=(200, 201, 202), **kwargs):
    started = time.perf_counter()
    try:
        response = await client.request(method, path, **kwargs)
    except httpx.HTTPError as error:
        result.errors[name] += 1
        result.unexpected.append(f"{name}: {type(error).__name__}")
        return None
    result.latencies[name].append(time.perf_counter() - started)
    if response.status_code not in expected:
        result.errors[name] += 1
        result.unexpected.append(f"{name}: {response.status_code} {response.text[:200]}")
        return None
    return response.json()


async def _agent(index, base_url, key, deadline, result):
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(
        base_url=base_url + "/api/v1", headers=headers, timeout=60
    ) as client:
        session = await _call(
            client,
            result,
            "session.create",
            "POST",
            "/sessions",
            json={"identity": {"user_name": f"load-{index}"}, "context_window_tokens": 200_000},
        )
        if session is None:
            return
        result.sessions.append(session["id"])
        root = await _call(
            client,
            result,
            "frame.push",
            "POST",
            f"/sessions/{session['id']}/frames",
            json={"goal": f"Load agent {index}", "budget": {"total": 10**8}},
        )
        if root is None:
            return
        round_ = 0
        while time.monotonic() < deadline:
            round_ += 1
            child = await _call(
                client,
                result,
                "frame.push",
                "POST",
                f"/sessions/{session['id']}/frames",
                json={
                    "goal": f"Step {round_}",
                    "parent_frame_id": root["id"],
                    "budget": {"total": 50_000},
                },
            )
            if child is None:
                continue
            for _ in range(2):
                await _call(
                    client,
                    result,
                    "usage.record",
                    "POST",
                    f"/frames/{child['id']}/usage",
                    json={"input_tokens": 120, "output_tokens": 40, "cache_read_input_tokens": 900},
                )
            key_name = f"load_{index}_{round_}"
            await _call(
                client,
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
            )
            await _call(
                client,
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
            )
            await _call(
                client,
                result,
                "context_pack",
                "POST",
                f"/sessions/{session['id']}/context-pack",
                json={"frame_id": child["id"], "budget_tokens": 4000, "query": "status"},
            )
            await _call(
                client,
                result,
                "frame.pop",
                "POST",
                f"/frames/{child['id']}/pop",
                json={"status": "completed"},
            )


async def run_load(*, base_url: str, keys: list[str], seconds: float) -> LoadResult:
    result = LoadResult(agents=len(keys), seconds=seconds)
    deadline = time.monotonic() + seconds
    await asyncio.gather(
        *(_agent(i, base_url, key, deadline, result) for i, key in enumerate(keys))
    )
    return result
