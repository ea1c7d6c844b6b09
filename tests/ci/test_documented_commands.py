"""Every documented command runs: the shell and Python blocks of README.md and
docs/agents.md (tests/ci/docs_blocks.py says how a block is marked) against a server
started as ``make run`` starts it (SQLite in a folder of its own, gunicorn and a Celery
worker: contextops/run.py), with the real client, the real ``contextops`` command and
Claude Code's CLI, the Anthropic and OpenAI SDKs pointed at tests/fakes/ through their
own ``*_BASE_URL`` variables. A block that stops working fails here, with its place."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from contextops_client import Client
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from tests.ci.docs_blocks import DOCUMENTS, ROOT, Block, all_blocks, blocks
from tests.ci.test_make_run import Server
from tests.client.test_mcp_hosts import npm_hosts
from tests.fakes.anthropic_server import AnthropicFakeServer
from tests.fakes.openai_server import OpenAIFakeServer

# The `make run` server of tests/ci/conftest.py, which test_make_run.py shares: one worker
# runs both modules, so the server is migrated, seeded and started once per run.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("make-run")]

TRANSCRIPT = ROOT / "tests" / "fixtures" / "transcripts" / "claude-code" / "spotter" / "short.jsonl"


def test_every_block_a_user_would_copy_is_marked_and_says_why_when_it_cannot_run():
    unmarked = [b.where for b in all_blocks() if not b.marker]
    assert unmarked == [], "mark each block <!-- runnable --> or <!-- not runnable: why -->"
    unexplained = [b.where for b in all_blocks() if not b.runnable and len(b.reason) < 20]
    assert unexplained == []
    assert sum(b.runnable for b in all_blocks()) >= 15


# -- the server ----------------------------------------------------------------------------


@pytest.fixture
def server(make_run_server: Server) -> Server:
    return make_run_server


@pytest.fixture
def fakes(monkeypatch):
    """The Anthropic and OpenAI APIs, where their SDKs' own variables point them."""
    with AnthropicFakeServer() as anthropic_api, OpenAIFakeServer() as openai_api:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", anthropic_api.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
        monkeypatch.setenv("OPENAI_BASE_URL", openai_api.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        yield anthropic_api, openai_api


# -- what a block assumes the reader has ---------------------------------------------------


class Tools(TypedDict):
    topic: str
    notes: list[str]


def _builder() -> StateGraph:
    """A two-node graph, for the blocks that compile "your" graph."""

    def research(state: Tools) -> dict:
        return {"notes": [*state.get("notes", []), f"read about {state['topic']}"]}

    def write(state: Tools) -> dict:
        return {"notes": [*state["notes"], "wrote the summary"]}

    graph = StateGraph(Tools)
    graph.add_node("research", research)
    graph.add_node("write", write)
    graph.add_edge(START, "research")
    graph.add_edge("research", "write")
    graph.add_edge("write", END)
    return graph


PYTHON_GIVEN = {
    "run_tool": lambda ns: lambda pack: f"tool output for a pack of {len(str(pack))} characters",
    "history": lambda ns: [{"role": "user", "content": "My order has not arrived."}],
    "tools": lambda ns: [
        {
            "type": "function",
            "function": {"name": "order_status", "parameters": {"type": "object"}},
        }
    ],
    "session": lambda ns: ns["ops"].session(title="from the docs"),
    "frame": lambda ns: ns["ops"].frame_push(ns["session"], goal="Doc example", budget=4_000),
    "builder": lambda ns: _builder(),
    "inputs": lambda ns: {"topic": "TLS 1.3", "notes": []},
}


def _python(block: Block, namespace: dict, server: Server) -> None:
    namespace.setdefault("ops", Client(server.url, server.key))
    for name in block.given:
        namespace[name] = PYTHON_GIVEN[name](namespace)
    code = block.code.replace("http://127.0.0.1:8000", server.url).replace("cops_...", server.key)
    exec(compile(code, block.where, "exec"), namespace)  # noqa: S102


def _shell_given(server: Server, home: Path, work: Path) -> dict[str, str]:
    """The placeholders the command line block names, as real objects of the demo
    organization; and a personal key, which ``contextops approve`` needs."""
    with Client(server.url, server.key) as ops:
        ended = ops.session(title="ended, for tail")
        with ops.frame(ended, goal="One step", budget=500):
            pass
        ops.session_end(ended)
        waiting = ops.session(title="needs a person")
        frame = ops.frame_push(waiting, goal="Publish", budget=1_000)
        token = ops.frame_suspend(frame, reason="Publish?", requires_approval=True).token
        state = ops.rlm_state_create("Summarize the RFC", session=waiting)
        live = ops.session(title="live, for pack")
        step = ops.frame_push(live, goal="Answer", budget=1_000)
        ops.handle_add(step, kind="document", content="TLS 1.2 and 1.3 are allowed.")
    shutil.copy(TRANSCRIPT, work / "session.jsonl")
    projects = home / ".claude" / "projects" / "-home-ada-project"
    projects.mkdir(parents=True)
    shutil.copy(TRANSCRIPT, projects / TRANSCRIPT.name)
    personal = server.manage(
        "create_api_key", "--org", "Demo", "--agent", "docs-cli", "--user", "demo"
    )
    key = next(word for word in personal.split() if word.startswith("cops_"))
    return {
        "SESSION_ID": ended.id,
        "LIVE_SESSION": live.id,
        "TOKEN": token,
        "STATE_ID": state["state_id"],
        "personal key": key,
    }


def _shell(block: Block, server: Server, env: dict, given: dict[str, str], work: Path) -> str:
    code = (
        block.code.replace("http://127.0.0.1:8000", server.url)
        .replace("cops_...", env["CONTEXTOPS_API_KEY"])
        .replace(".venv/bin/python manage.py", f"{sys.executable} {ROOT / 'manage.py'}")
    )
    for name in block.given:
        if name in given and name.isupper():
            code = code.replace(name, given[name])
    block_env = dict(env)
    if "personal key" in block.given:
        block_env["CONTEXTOPS_API_KEY"] = given["personal key"]
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", code],
        cwd=work,
        env=block_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"{block.where} failed:\n{code}\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda d: d.name)
def test_the_runnable_blocks_run_in_order_against_a_live_server(
    document, server, fakes, tmp_path, monkeypatch
):
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.setenv("CONTEXTOPS_URL", server.url)
    monkeypatch.setenv("CONTEXTOPS_API_KEY", server.key)
    monkeypatch.setenv("HOME", str(home))
    env = {
        **server.env,
        "HOME": str(home),
        "CONTEXTOPS_URL": server.url,
        "CONTEXTOPS_API_KEY": server.key,
        "PATH": os.pathsep.join(
            [str(Path(sys.executable).parent), str(npm_hosts()), os.environ["PATH"]]
        ),
    }
    runnable = [b for b in blocks(document) if b.runnable]
    given: dict[str, str] = {}
    if any(b.language == "sh" and "SESSION_ID" in b.given for b in runnable):
        given = _shell_given(server, home, work)
    namespace: dict = {"__name__": "__docs__"}
    ran = []
    for block in runnable:
        if block.language == "python":
            _python(block, namespace, server)
        else:
            _shell(block, server, env, given, work)
        ran.append(block.where)
    assert ran, f"{document.name} has no runnable block"
    if "SESSION_ID" in given:  # the command line block did what it says
        exported = json.loads((work / "state.json").read_text())
        assert exported["state_id"] == given["STATE_ID"]
        assert exported["variables"]["prompt"]["value"] == "Summarize the RFC"
        with Client(server.url, server.key) as ops:
            assert [p["query"] for p in ops.context_packs(given["LIVE_SESSION"])] == [
                "TLS versions"
            ]
