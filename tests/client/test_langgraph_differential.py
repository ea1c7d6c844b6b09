"""The saver and the store against LangGraph's own: the same graphs, inputs and resumes
run on ``InMemorySaver`` (and ``PostgresSaver`` where PostgreSQL runs) and on
``ContextopsSaver`` through the live server, synchronously and asynchronously; every
state, the whole history, every output and every ``list`` answer must be the same once
the ids and times that legitimately differ are named by their order of appearance.

Each scenario is an async function of a ``Runner`` that records what a user sees into
``run.seen``; the test compares the referee's record with ours.
"""

import asyncio
import contextlib
import dataclasses
import difflib
import operator
import os
import pprint
import re
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Annotated, Any, TypedDict

import pytest
from contextops_client.langgraph import ContextopsSaver, ContextopsStore
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import Item
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command, Send, interrupt

POSTGRES = os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://"))
REFEREES = ["memory", "postgres"] if POSTGRES else ["memory"]

# -- normalising what a user sees ---------------------------------------------------------

IDS = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\b[0-9a-f]{32}\b")
TIMES = {"created_at", "updated_at", "ts"}


def _plain(value: Any) -> Any:
    """Snapshots, tasks, interrupts, sends and errors as plain data, in a stable order."""
    if isinstance(value, BaseException):
        return {"error": type(value).__name__, "text": str(value)}
    if hasattr(value, "_asdict"):
        return {"__type__": type(value).__name__, **_plain(value._asdict())}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return {"__type__": type(value).__name__, **_plain(fields)}
    if isinstance(value, Item):
        return {"__type__": type(value).__name__, **_plain(value.dict())}
    if isinstance(value, Send | Command):
        return {"__type__": type(value).__name__, "repr": repr(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items() if k not in TIMES}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "__dict__") and not isinstance(value, type):
        return {"__type__": type(value).__name__, **_plain(vars(value))}
    return value


def normalised(seen: list[Any]) -> list[Any]:
    """``seen`` with every id replaced by the order it first appears in."""
    labels: dict[str, str] = {}

    def label(match: re.Match) -> str:
        return labels.setdefault(match.group(0), f"<id{len(labels)}>")

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return IDS.sub(label, value)
        if isinstance(value, dict):
            return {walk(k): walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    return walk(_plain(seen))


# -- running the same scenario on two savers ----------------------------------------------


class Runner:
    """A compiled graph on one saver, driven synchronously or asynchronously; what a
    scenario reads goes to ``seen``."""

    def __init__(self, saver, mode: str):
        self.saver, self.mode, self.seen = saver, mode, []

    def config(self, thread: str, **more: Any) -> dict:
        return {"configurable": {"thread_id": thread, **more}}

    def compile(self, builder: StateGraph):
        return builder.compile(checkpointer=self.saver)

    async def invoke(self, graph, value, config, **kw) -> Any:
        if self.mode == "async":
            out = await graph.ainvoke(value, config, **kw)
        else:
            out = graph.invoke(value, config, **kw)
        shown = out
        if isinstance(out, dict) and "__interrupt__" in out:
            # Parallel tasks' interrupts come in the order the tasks stopped (the scheduler's).
            asked = sorted(out["__interrupt__"], key=lambda i: repr(i.value))
            shown = {**out, "__interrupt__": asked}
        self.seen.append(("output", shown))
        return out

    async def stream(self, graph, value, config, **kw) -> list:
        if self.mode == "async":
            chunks = [c async for c in graph.astream(value, config, **kw)]
        else:
            chunks = list(graph.stream(value, config, **kw))
        # Parallel tasks report in the order they finish, which is the scheduler's.
        self.seen.append(("stream", sorted(chunks, key=repr)))
        return chunks

    async def state(self, graph, config, subgraphs: bool = False):
        if self.mode == "async":
            snapshot = await graph.aget_state(config, subgraphs=subgraphs)
        else:
            snapshot = graph.get_state(config, subgraphs=subgraphs)
        self.seen.append(("state", snapshot))
        return snapshot

    async def history(self, graph, config, **kw) -> list:
        if self.mode == "async":
            found = [s async for s in graph.aget_state_history(config, **kw)]
        else:
            found = list(graph.get_state_history(config, **kw))
        self.seen.append(("history", len(found), found))
        return found

    async def update(self, graph, config, values, as_node: str | None = None) -> dict:
        if self.mode == "async":
            forked = await graph.aupdate_state(config, values, as_node=as_node)
        else:
            forked = graph.update_state(config, values, as_node=as_node)
        self.seen.append(("updated", forked))
        return forked

    async def tuples(self, config, **kw) -> list:
        if self.mode == "async":
            found = [t async for t in self.saver.alist(config, **kw)]
        else:
            found = list(self.saver.list(config, **kw))
        if "checkpoint_ns" not in config["configurable"]:
            # Across namespaces the order is each saver's own (in memory: namespace by
            # namespace; PostgreSQL and ours: by id alone): compared namespace by namespace.
            found.sort(key=lambda t: t.config["configurable"]["checkpoint_ns"] != "")
        self.seen.append(("list", kw.get("filter"), len(found), [_tuple_seen(t) for t in found]))
        return found

    async def delete(self, thread: str) -> None:
        if self.mode == "async":
            await self.saver.adelete_thread(thread)
        else:
            self.saver.delete_thread(thread)


def _tuple_seen(t) -> dict:
    checkpoint = {k: v for k, v in t.checkpoint.items() if k not in ("channel_versions", "ts")}
    checkpoint.pop("versions_seen", None)
    writes = sorted(t.pending_writes or [], key=lambda w: (w[1], repr(_plain(w[2]))))
    return {
        "config": t.config,
        "parent": t.parent_config,
        "metadata": t.metadata,
        "values": checkpoint.get("channel_values"),
        "writes": [(w[1], w[2]) for w in writes],
    }


# -- the graphs ----------------------------------------------------------------------------


class Review(TypedDict, total=False):
    topic: str
    draft: str
    decision: str
    published: str


def review_graph():
    """The issue's graph: write a draft, a person reviews it (``interrupt``), publish."""

    def write_draft(state: Review) -> dict:
        return {"draft": f"draft about {state['topic']}"}

    def human_review(state: Review) -> dict:
        return {"decision": interrupt({"question": "Publish this draft?", "draft": state["draft"]})}

    def publish(state: Review) -> dict:
        return {"published": f"{state['draft']} ({state['decision']})"}

    builder = StateGraph(Review)
    builder.add_node("write_draft", write_draft)
    builder.add_node("human_review", human_review)
    builder.add_node("publish", publish)
    builder.add_edge(START, "write_draft")
    builder.add_edge("write_draft", "human_review")
    builder.add_edge("human_review", "publish")
    builder.add_edge("publish", END)
    return builder


class Log(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    answers: Annotated[list[str], operator.add]


# -- the scenarios -------------------------------------------------------------------------


async def fork_with_as_node(run: Runner) -> None:
    """The issue's time travel: fork the checkpoint before the review as if the draft
    node wrote again; the fork interrupts again and publishes the new decision."""
    graph = run.compile(review_graph())
    config = run.config("fork")
    await run.invoke(graph, {"topic": "otters"}, config)
    await run.invoke(graph, Command(resume="approved"), config)
    history = await run.history(graph, config)
    before_review = next(s for s in history if s.next == ("human_review",))
    fork = await run.update(graph, before_review.config, {"draft": "v2"}, as_node="write_draft")
    await run.state(graph, fork)
    await run.invoke(graph, None, fork)
    await run.state(graph, config)
    await run.invoke(graph, Command(resume="approved again"), config)
    await run.state(graph, config)
    await run.history(graph, config)


async def fork_without_as_node(run: Runner) -> None:
    graph = run.compile(review_graph())
    config = run.config("fork-plain")
    await run.invoke(graph, {"topic": "owls"}, config)
    await run.invoke(graph, Command(resume="no"), config)
    history = await run.history(graph, config)
    for past in (s for s in history if s.next in (("human_review",), ("write_draft",))):
        fork = await run.update(graph, past.config, {"topic": "badgers"})
        await run.state(graph, fork)
        await run.invoke(graph, None, fork)
        await run.state(graph, config)
    await run.history(graph, config)


async def replay_from_the_past(run: Runner) -> None:
    graph = run.compile(review_graph())
    config = run.config("replay")
    await run.invoke(graph, {"topic": "moles"}, config)
    await run.invoke(graph, Command(resume="yes"), config)
    history = await run.history(graph, config)
    for past in (s for s in history if s.next in (("write_draft",), ("human_review",))):
        await run.invoke(graph, None, past.config)
        await run.state(graph, config)
        await run.invoke(graph, Command(resume="yes, again"), config)
    await run.history(graph, config)


def _two_questions():
    def fan(state: Log) -> dict:
        return {"log": ["fan"]}

    def ask(name: str):
        def node(state: Log) -> dict:
            return {"answers": [f"{name}={interrupt({'question': f'{name}?'})}"]}

        return node

    builder = StateGraph(Log)
    builder.add_node("fan", fan)
    builder.add_node("legal", ask("legal"))
    builder.add_node("finance", ask("finance"))
    builder.add_node("done", lambda state: {"log": ["done"]})
    builder.add_edge(START, "fan")
    builder.add_edge("fan", "legal")
    builder.add_edge("fan", "finance")
    builder.add_edge(["legal", "finance"], "done")
    builder.add_edge("done", END)
    return builder


async def interrupts_resumed_by_id(run: Runner) -> None:
    """Two interrupts in one step: one answered by its id, then the other, then both at
    once on a second thread."""
    graph = run.compile(_two_questions())
    config = run.config("two")
    await run.invoke(graph, {"log": []}, config)
    state = await run.state(graph, config)
    by_question = {i.value["question"]: i.id for i in state.interrupts}
    await run.invoke(graph, Command(resume={by_question["legal?"]: "ok"}), config)
    state = await run.state(graph, config)
    await run.invoke(graph, Command(resume={state.interrupts[0].id: "fine"}), config)
    await run.state(graph, config)
    await run.history(graph, config)
    both = run.config("two-at-once")
    await run.invoke(graph, {"log": []}, both)
    state = await run.state(graph, both)
    await run.invoke(graph, Command(resume={i.id: "yes" for i in state.interrupts}), both)
    await run.history(graph, both)


def _with_subgraph():
    def sub_plan(state: Log) -> dict:
        return {"log": ["sub_plan"]}

    def sub_check(state: Log) -> dict:
        return {"answers": [str(interrupt("check the plan?"))]}

    sub = StateGraph(Log)
    sub.add_node("sub_plan", sub_plan)
    sub.add_node("sub_check", sub_check)
    sub.add_edge(START, "sub_plan")
    sub.add_edge("sub_plan", "sub_check")
    sub.add_edge("sub_check", END)

    builder = StateGraph(Log)
    builder.add_node("start", lambda state: {"log": ["start"]})
    builder.add_node("inner", sub.compile())
    builder.add_node("finish", lambda state: {"log": ["finish"]})
    builder.add_edge(START, "start")
    builder.add_edge("start", "inner")
    builder.add_edge("inner", "finish")
    builder.add_edge("finish", END)
    return builder


async def subgraph_with_a_fork_inside(run: Runner) -> None:
    graph = run.compile(_with_subgraph())
    config = run.config("nested")
    await run.invoke(graph, {"log": []}, config)
    state = await run.state(graph, config, subgraphs=True)
    inner = state.tasks[0].state
    await run.history(graph, inner.config)
    # A fork inside the subgraph's own namespace, then the parent resumes.
    await run.update(graph, inner.config, {"log": ["edited inside"]})
    await run.state(graph, config, subgraphs=True)
    await run.invoke(graph, Command(resume="checked"), config)
    await run.state(graph, config, subgraphs=True)
    await run.history(graph, config)
    await run.tuples(config)


async def send_fan_out(run: Runner) -> None:
    def split(state: Log) -> list[Send]:
        return [Send("work", {"log": [f"part {i}"]}) for i in range(4)]

    builder = StateGraph(Log)
    builder.add_node("plan", lambda state: {"log": ["plan"]})
    builder.add_node("work", lambda state: {"answers": [f"did {state['log'][-1]}"]})
    builder.add_node("merge", lambda state: {"log": [f"merged {len(state['answers'])}"]})
    builder.add_edge(START, "plan")
    builder.add_conditional_edges("plan", split, ["work"])
    builder.add_edge("work", "merge")
    builder.add_edge("merge", END)
    graph = run.compile(builder)
    config = run.config("send")
    await run.invoke(graph, {"log": []}, config)
    await run.history(graph, config)
    await run.stream(graph, {"log": ["again"]}, config, stream_mode="updates")
    await run.state(graph, config)


async def error_then_resume(run: Runner) -> None:
    """A node fails while its sibling succeeded: the sibling's write stays pending and is
    not run again when the thread resumes."""
    calls = {"steady": 0, "flaky": 0}
    # The failure waits until the sibling's writes are saved, so which of the two parallel
    # tasks finishes first is not left to the scheduler.
    saved = threading.Event()
    put_writes, aput_writes = run.saver.put_writes, run.saver.aput_writes

    def put_writes_seen(config, writes, task_id, task_path=""):
        put_writes(config, writes, task_id, task_path)
        if ("log", ["steady"]) in list(writes):
            saved.set()

    async def aput_writes_seen(config, writes, task_id, task_path=""):
        await aput_writes(config, writes, task_id, task_path)
        if ("log", ["steady"]) in list(writes):
            saved.set()

    run.saver.put_writes, run.saver.aput_writes = put_writes_seen, aput_writes_seen

    def steady(state: Log) -> dict:
        calls["steady"] += 1
        return {"log": ["steady"]}

    def flaky(state: Log) -> dict:
        calls["flaky"] += 1
        assert saved.wait(timeout=30)
        if calls["flaky"] == 1:
            raise ValueError("the upstream service is down")
        return {"log": ["flaky"]}

    builder = StateGraph(Log)
    builder.add_node("begin", lambda state: {"log": ["begin"]})
    builder.add_node("steady", steady)
    builder.add_node("flaky", flaky)
    builder.add_edge(START, "begin")
    builder.add_edge("begin", "steady")
    builder.add_edge("begin", "flaky")
    builder.add_edge(["steady", "flaky"], END)
    graph = run.compile(builder)
    config = run.config("flaky")
    with pytest.raises(ValueError, match="upstream service is down"):
        await run.invoke(graph, {"log": []}, config)
    await run.state(graph, config)
    await run.invoke(graph, None, config)
    run.seen.append(("calls", dict(calls)))
    await run.history(graph, config)


async def delete_a_thread(run: Runner) -> None:
    graph = run.compile(review_graph())
    for thread in ("keep", "drop"):
        await run.invoke(graph, {"topic": thread}, run.config(thread))
    await run.delete("drop")
    await run.delete("never-was")
    await run.state(graph, run.config("drop"))
    await run.history(graph, run.config("drop"))
    await run.history(graph, run.config("keep"))


async def list_with_filter_before_and_limit(run: Runner) -> None:
    graph = run.compile(review_graph())
    config = run.config("listed")
    await run.invoke(graph, {"topic": "seals"}, config)
    await run.invoke(graph, Command(resume="fine"), config)
    await run.update(graph, config, {"topic": "sea lions"})
    every = await run.tuples(config)
    await run.tuples(config, limit=2)
    await run.tuples(config, filter={"source": "loop"})
    await run.tuples(config, filter={"step": 1})
    await run.tuples(config, filter={"source": "update"}, limit=5)
    await run.tuples(config, filter={"source": "nothing"})
    await run.tuples(config, before=every[2].config)
    await run.tuples(config, before=every[2].config, limit=1)
    await run.tuples(config, before=every[-1].config)
    await run.tuples(run.config("listed", checkpoint_ns=""), filter={"source": "input"})
    await run.tuples(run.config("no-such-thread"))


async def durability_modes(run: Runner) -> None:
    for durability in ("sync", "async", "exit"):
        graph = run.compile(review_graph())
        config = run.config(f"durable-{durability}")
        await run.invoke(graph, {"topic": durability}, config, durability=durability)
        await run.state(graph, config)
        await run.invoke(graph, Command(resume="ok"), config, durability=durability)
        await run.history(graph, config)
        await run.tuples(config, filter={"source": "loop"})


SCENARIOS: dict[str, Callable[[Runner], Awaitable[None]]] = {
    f.__name__: f
    for f in (
        fork_with_as_node,
        fork_without_as_node,
        replay_from_the_past,
        interrupts_resumed_by_id,
        subgraph_with_a_fork_inside,
        send_fan_out,
        error_then_resume,
        delete_a_thread,
        list_with_filter_before_and_limit,
        durability_modes,
    )
}


# -- the referees ----------------------------------------------------------------------------


@contextlib.contextmanager
def referee_saver(name: str) -> Iterator[Any]:
    """LangGraph's own saver: in memory, or PostgreSQL in a schema of its own in the test
    database (dropped afterwards)."""
    if name == "memory":
        yield InMemorySaver()
        return
    import psycopg
    from django.db import connection
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    db = connection.settings_dict
    schema = f"lgref_{uuid.uuid4().hex[:12]}"
    conninfo = psycopg.conninfo.make_conninfo(
        dbname=db["NAME"],
        user=db["USER"] or "postgres",
        password=db["PASSWORD"] or None,
        host=db["HOST"] or "127.0.0.1",
        port=str(db["PORT"] or 5432),
    )
    with psycopg.connect(conninfo, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    conn = psycopg.connect(
        conninfo, autocommit=True, row_factory=dict_row, options=f"-c search_path={schema}"
    )
    saver = PostgresSaver(conn)
    saver.setup()
    yield saver
    conn.close()
    with psycopg.connect(conninfo, autocommit=True) as admin:
        admin.execute(f"DROP SCHEMA {schema} CASCADE")


def _record(saver, mode: str, scenario) -> list[Any]:
    run = Runner(saver, mode)

    async def go() -> None:
        try:
            await scenario(run)
        finally:
            if isinstance(saver, ContextopsSaver):
                await saver.aclose()  # on the loop its connections belong to

    asyncio.run(go())
    return normalised(run.seen)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_the_saver_answers_as_langgraphs_own(name, mode, agent):
    """Ours runs the scenario once, through the live server; each referee's record must
    equal it."""
    scenario = SCENARIOS[name]
    saver = ContextopsSaver(agent.url, agent.key, retries=1, backoff=0.01)
    try:
        ours = _record(saver, mode, scenario)
    finally:
        saver.close()
    for referee in REFEREES:
        with referee_saver(referee) as reference:
            expected = _record(reference, "sync", scenario)
        _same(ours, expected, referee)


def _same(ours: list[Any], expected: list[Any], referee: str = "memory") -> None:
    """Equal, or fail with the first differing step as a unified diff of the two."""
    for i, (got, want) in enumerate(zip(ours, expected, strict=False)):
        if got != want:
            diff = difflib.unified_diff(
                pprint.pformat(want, width=100).splitlines(),
                pprint.pformat(got, width=100).splitlines(),
                f"langgraph ({referee})",
                "contextops",
                lineterm="",
            )
            pytest.fail(f"step {i} ({want[0]}) differs from {referee}:\n" + "\n".join(diff))
    assert len(ours) == len(expected), referee


def test_the_issue_fork_reaches_eight_checkpoints_and_the_new_decision(agent):
    saver = ContextopsSaver(agent.url, agent.key, retries=1, backoff=0.01)
    run = Runner(saver, "sync")
    asyncio.run(fork_with_as_node(run))
    final = [s for kind, *s in run.seen if kind == "history"][-1]
    assert final[0] == 8
    assert final[1][0].values == {
        "topic": "otters",
        "draft": "v2",
        "decision": "approved again",
        "published": "v2 (approved again)",
    }
    saver.close()


# -- the store ---------------------------------------------------------------------------


async def store_scenario(store, mode: str) -> list[Any]:
    seen: list[Any] = []

    async def call(name: str, *args, **kw):
        if mode == "async":
            answer = await getattr(store, f"a{name}")(*args, **kw)
        else:
            answer = getattr(store, name)(*args, **kw)
        seen.append((name, args, kw, answer))
        return answer

    await call("put", ("users", "ada"), "prefs", {"theme": "dark", "size": 3})
    await call("put", ("users", "ada"), "memo", {"text": "likes otters", "size": 1})
    await call("put", ("users", "bob"), "prefs", {"theme": "light", "size": 5})
    await call("put", ("teams", "core", "notes"), "n1", {"status": "open", "size": 2})
    await call("put", ("users", "ada"), "prefs", {"theme": "solarized", "size": 4})
    await call("get", ("users", "ada"), "prefs")
    await call("get", ("users", "ada"), "missing")
    for query in (
        {"namespace_prefix": ("users",)},
        {"namespace_prefix": ("users", "ada")},
        {"namespace_prefix": ("users",), "filter": {"theme": "light"}},
        {"namespace_prefix": ("users",), "filter": {"size": {"$gte": 4}}},
        {"namespace_prefix": ("users",), "filter": {"size": {"$lt": 4}, "theme": {"$ne": "x"}}},
        {"namespace_prefix": (), "filter": {"status": "open"}},
        {"namespace_prefix": ("users",), "limit": 1},
        {"namespace_prefix": ("users",), "limit": 2, "offset": 1},
        {"namespace_prefix": ("absent",)},
    ):
        prefix = query.pop("namespace_prefix")
        found = await call("search", prefix, **query)
        seen.append(("found keys", sorted((i.namespace, i.key) for i in found)))
    await call("list_namespaces")
    await call("list_namespaces", prefix=("users",))
    await call("list_namespaces", suffix=("notes",))
    await call("list_namespaces", max_depth=1)
    await call("list_namespaces", prefix=("users",), limit=1, offset=1)
    await call("delete", ("users", "bob"), "prefs")
    await call("get", ("users", "bob"), "prefs")
    # The in-memory store lists a namespace whose last item went (it keeps the empty
    # dictionary); LangGraph's PostgreSQL store, like ours, lists only namespaces with items.
    after = await store.alist_namespaces() if mode == "async" else store.list_namespaces()
    seen.append(("namespaces after the delete", [n for n in after if n != ("users", "bob")]))
    await call("delete", ("users", "bob"), "never-was")
    # Last: the in-memory store keeps an empty namespace for a read of a new one.
    await call("get", ("nobody",), "prefs")
    return seen


def _store_seen(seen: list[Any]) -> list[Any]:
    """Items without their times; a search's items in a stable order (the store's order
    among equally new items is its own), the keys found compared as they came."""
    out = []
    for entry in seen:
        if entry[0] == "search":
            items = sorted(_plain(entry[3]), key=lambda i: (i["namespace"], i["key"]))
            out.append((entry[0], _plain(entry[1:3]), items))
        else:
            out.append(_plain(entry))
    return out


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_store_answers_as_langgraphs_in_memory_store(mode, agent):
    expected = _store_seen(asyncio.run(store_scenario(InMemoryStore(), "sync")))
    store = ContextopsStore(agent.url, agent.key, retries=1, backoff=0.01)

    async def ours_seen() -> list[Any]:
        try:
            return await store_scenario(store, mode)
        finally:
            await store.aclose()

    try:
        ours = _store_seen(asyncio.run(ours_seen()))
        assert ("users", "bob") not in store.list_namespaces()
    finally:
        store.close()
    _same(ours, expected)
