"""ContextopsSaver against the live server: LangGraph's conformance suite, and a real graph."""

import asyncio
import operator
import threading
from pathlib import Path
from typing import Annotated, TypedDict

import pytest
from contextops_client.langgraph import ContextopsSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.report import ProgressCallbacks
from langgraph.graph import END, START, StateGraph

from frames.graphs.models import GraphThread
from frames.models import Event

REPORT = Path(__file__).resolve().parents[2] / "var" / "langgraph-conformance.txt"


def test_it_passes_the_whole_langgraph_conformance_suite(agent, capsys):
    @checkpointer_test(name="ContextopsSaver")
    async def contextops_saver():
        saver = ContextopsSaver(agent.url, agent.key, retries=1, backoff=0.01)
        yield saver
        saver.close()
        await saver.aclose()

    report = asyncio.run(validate(contextops_saver, progress=ProgressCallbacks.verbose()))
    report.print_report()
    printed = capsys.readouterr().out
    REPORT.parent.mkdir(exist_ok=True)
    REPORT.write_text(printed)
    failures = {name: r.failures for name, r in report.results.items() if r.failures}
    assert failures == {}
    assert report.passed_all_base()
    for capability in ("delete_for_runs", "copy_thread", "prune"):
        result = report.results[capability]
        assert result.detected and result.passed, capability
    assert all(r.tests_passed > 0 for r in report.results.values())


class State(TypedDict):
    steps: Annotated[list[str], operator.add]
    total: int


def _graph(saver):
    def plan(state: State) -> dict:
        return {"steps": ["plan"], "total": state["total"] + 1}

    def act(state: State) -> dict:
        return {"steps": ["act"], "total": state["total"] * 10}

    builder = StateGraph(State)
    builder.add_node("plan", plan)
    builder.add_node("act", act)
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "act")
    builder.add_edge("act", END)
    return builder.compile(checkpointer=saver)


def test_a_real_graph_runs_on_the_saver_and_resumes_its_thread(agent, start_session):
    saver = ContextopsSaver(agent.url, agent.key, retries=1, backoff=0.01)
    graph = _graph(saver)
    config = {"configurable": {"thread_id": "order-7"}}
    assert graph.invoke({"steps": [], "total": 1}, config) == {
        "steps": ["plan", "act"],
        "total": 20,
    }
    # A second run on the thread starts from what the first left.
    assert graph.invoke({"steps": ["again"], "total": 3}, config)["steps"] == [
        "plan",
        "act",
        "again",
        "plan",
        "act",
    ]
    history = list(graph.get_state_history(config))
    assert [s.metadata["step"] for s in history] == [6, 5, 4, 3, 2, 1, 0, -1]
    assert history[-1].metadata["source"] == "input"
    # Time travel: the state after the first plan step, read back through the API.
    first_plan = next(s for s in reversed(history) if s.metadata["step"] == 1)
    assert first_plan.values == {"steps": ["plan"], "total": 2}
    thread = GraphThread.objects.get(thread_id="order-7")
    assert thread.organization == agent.organization
    assert Event.objects.filter(
        session=thread.session, type="graph.checkpoint_saved"
    ).count() == len(history)
    saver.close()


def test_the_async_graph_api_uses_the_same_thread(agent):
    saver = ContextopsSaver(agent.url, agent.key, retries=1, backoff=0.01)
    graph = _graph(saver)
    config = {"configurable": {"thread_id": "async-1"}}

    async def run():
        out = await graph.ainvoke({"steps": [], "total": 2}, config)
        state = await graph.aget_state(config)
        await saver.aclose()
        return out, state

    out, state = asyncio.run(run())
    assert out == {"steps": ["plan", "act"], "total": 30}
    assert state.values == out
    assert saver.get_tuple(config).checkpoint["channel_values"]["total"] == 30
    saver.close()


def test_a_saver_puts_its_threads_in_the_session_it_names(agent, ops):
    session = ops.session_create(identity={"user_name": "Ada"})
    saver = ContextopsSaver(agent.url, agent.key, session=session, retries=1, backoff=0.01)
    _graph(saver).invoke({"steps": [], "total": 0}, {"configurable": {"thread_id": "in-session"}})
    assert str(GraphThread.objects.get(thread_id="in-session").session_id) == session.id
    saver.close()


def test_another_organizations_saver_sees_none_of_the_threads(agent, make_agent):
    ours = ContextopsSaver(agent.url, agent.key, retries=1, backoff=0.01)
    _graph(ours).invoke({"steps": [], "total": 0}, {"configurable": {"thread_id": "private"}})
    intruder = make_agent(org="Globex", agent="intruder")
    theirs = ContextopsSaver(intruder.url, intruder.key, retries=1, backoff=0.01)
    config = {"configurable": {"thread_id": "private"}}
    assert theirs.get_tuple(config) is None
    assert list(theirs.list(None)) == []
    theirs.delete_thread("private")
    assert ours.get_tuple(config) is not None
    ours.close()
    theirs.close()


def test_a_thread_saved_with_whole_number_versions_goes_on_under_this_saver(agent):
    """Threads written before channel versions took LangGraph's ``<number>.<random>`` form
    keep their whole numbers (a checkpoint's versions are compared with each other)."""
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.types import Command

    from tests.client.test_langgraph_differential import review_graph

    class Before(ContextopsSaver):
        get_next_version = BaseCheckpointSaver.get_next_version

    config = {"configurable": {"thread_id": "from-before"}}
    old = Before(agent.url, agent.key, retries=1, backoff=0.01)
    review_graph().compile(checkpointer=old).invoke({"topic": "kelp"}, config)
    assert set(map(type, old.get_tuple(config).checkpoint["channel_versions"].values())) == {int}
    saver = ContextopsSaver(agent.url, agent.key, retries=1, backoff=0.01)
    graph = review_graph().compile(checkpointer=saver)
    assert graph.invoke(Command(resume="fine"), config)["published"] == "draft about kelp (fine)"
    assert set(map(type, saver.get_tuple(config).checkpoint["channel_versions"].values())) == {int}
    fresh = {"configurable": {"thread_id": "from-now"}}
    graph.invoke({"topic": "reefs"}, fresh)
    assert set(map(type, saver.get_tuple(fresh).checkpoint["channel_versions"].values())) == {str}
    old.close()
    saver.close()


def _first_checkpoint(saver, thread_id: str):
    """A thread's first checkpoint as LangGraph puts it, and the config its writes name."""
    from langgraph.checkpoint.base import empty_checkpoint

    checkpoint = empty_checkpoint()
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    return checkpoint, config, {**config["configurable"], "checkpoint_id": checkpoint["id"]}


def test_writes_sent_beside_a_new_threads_first_checkpoint_wait_for_it(agent):
    """LangGraph's async and exit durability send a step's writes while its checkpoint is
    still on its way; the server refuses writes to a thread it does not hold, so the
    saver tries them again until the checkpoint lands, synchronously and asynchronously."""
    from contextops_client.errors import NotFound

    saver = ContextopsSaver(agent.url, agent.key, retries=1, backoff=0.01)

    async def on_the_loop(config, writes):
        await saver.aput_writes(config, writes, "task-1")
        await saver.aclose()

    for thread_id, mode in (("sync-race", "sync"), ("async-race", "async")):
        checkpoint, config, written = _first_checkpoint(saver, thread_id)
        late = threading.Timer(0.3, saver.put, (config, checkpoint, {"step": -1}, {}))
        late.start()
        if mode == "sync":
            saver.put_writes({"configurable": written}, [("ch", "v")], "task-1")
        else:
            asyncio.run(on_the_loop({"configurable": written}, [("ch", "v")]))
        late.join()
        stored = saver.get_tuple({"configurable": written})
        assert stored.pending_writes == [("task-1", "ch", "v")], thread_id
    saver.close()
    # A thread nobody stores: the 404 stands once the wait is over, and nothing is created.
    brief = ContextopsSaver(agent.url, agent.key, retries=1, backoff=0.01, checkpoint_wait=0.3)
    _, _, written = _first_checkpoint(brief, "never-stored")
    with pytest.raises(NotFound):
        brief.put_writes({"configurable": written}, [("ch", "v")], "task-1")
    assert not GraphThread.objects.filter(thread_id="never-stored").exists()
    brief.close()
