"""The async twin against the live server: the same calls, awaited; ``async with`` frames."""

import asyncio
import uuid

import pytest
from contextops_client import AsyncClient, InsufficientTokens, NotFound, Session

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.xdist_group("live")]


def test_it_runs_sessions_frames_and_budgets_asynchronously(agent):
    async def run():
        async with AsyncClient(agent.url, agent.key, retries=1, backoff=0.01) as ops:
            session = await ops.session(title="async")
            assert isinstance(session, Session)
            async with ops.frame(session, goal="Root", budget=1000) as root:
                await root.reserve("brief_context", 100)
                async with ops.frame(session, goal="Child", budget=300) as child:
                    assert child.parent_frame_id == root.id
                    assert ops.current_frame(session) == child
                    await child.usage(input_tokens=100, output_tokens=50)
                    with pytest.raises(InsufficientTokens) as caught:
                        await child.reserve("too much", 200)
                    assert (caught.value.requested, caught.value.available) == (200, 150)
                await root.refresh()
                assert root.budget["used"] == 150
            assert root.status == "completed"
            with pytest.raises(NotFound):
                await ops.frame_get(uuid.uuid4())
            with pytest.raises(ValueError):
                async with ops.frame(session, goal="Breaks", budget=10) as broken:
                    raise ValueError("no")
            broken = await ops.frame_get(broken)
            assert (broken.status, broken.failure_reason) == ("failed", "ValueError: no")
            pack = await ops.context_pack(session, budget_tokens=500)
            assert pack["token_summary"]["used"] <= 500
            return session

    session = asyncio.run(run())
    assert session.dashboard_url.endswith(f"/sessions/{session.id}/")


def test_it_keeps_concurrent_tasks_frame_stacks_apart(agent):
    async def worker(ops, session, name, together):
        async with ops.frame(session, goal=name, budget=50) as frame:
            await together.wait()  # all three frames are open at once
            assert ops.current_frame(session) == frame
            return frame.parent_frame_id

    async def run():
        async with AsyncClient(agent.url, agent.key) as ops:
            session = await ops.session()
            together = asyncio.Barrier(3)
            async with ops.frame(session, goal="Fan out", budget=1000) as root:
                parents = await asyncio.gather(
                    *(worker(ops, session, f"task {i}", together) for i in range(3))
                )
            return root, parents

    root, parents = asyncio.run(run())
    assert parents == [root.id] * 3
