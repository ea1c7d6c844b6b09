"""``contextops mcp`` against the live server, driven by the MCP SDK's own client: over
stdio (the command as a host spawns it) and over Streamable HTTP (each caller's key as a
bearer token)."""

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import httpx2
import pytest
from contextops_client import Client
from contextops_client.mcp import TOOLS
from mcp import Client as McpClient
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from contextops.api import api
from tests.client.test_cli import script

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.xdist_group("live")]

CLIENT_ROOT = Path(__file__).resolve().parents[2] / "clients" / "python"
TOOL_NAMES = {
    "session_start",
    "session_resume",
    "session_end",
    "frame_push",
    "frame_pop",
    "frame_suspend",
    "usage_record",
    "handle_add",
    "context_pack",
    "fact_write",
    "fact_current",
    "fact_lineage",
    "fact_conflicts",
    "fact_conflict_accept",
    "fact_conflict_reject",
    "fact_conflict_distinct",
    "working_set_put",
    "working_set_get",
    "rlm_state_create",
    "rlm_read",
    "rlm_write",
    "rlm_checkpoint",
    "rlm_rollback",
}


def stdio_server(agent, key: str | None = None) -> StdioServerParameters:
    """``python -m contextops_client.cli mcp`` configured from the environment, as
    ``claude mcp add contextops -- contextops mcp`` runs it."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "CONTEXTOPS_URL": agent.url,
        "CONTEXTOPS_API_KEY": key or agent.key,
    }
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "contextops_client.cli", "mcp"],
        env=env,
        cwd=str(CLIENT_ROOT),
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def http_server(agent):
    """The installed ``contextops mcp --http`` on a free port, pointed at the live server:
    its URL."""
    port = free_port()
    # The command's own key is set, and must never stand in for a caller's.
    env = {**os.environ, "CONTEXTOPS_URL": agent.url, "CONTEXTOPS_API_KEY": agent.key}
    process = subprocess.Popen(
        [script(), "mcp", "--http", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=str(CLIENT_ROOT),
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"the MCP server did not start: {process.stderr.read().decode()}")
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/mcp"
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    process.stderr.close()


@asynccontextmanager
async def http_client(url: str, key: str | None):
    """The SDK's Streamable HTTP client, sending ``key`` as a bearer token."""
    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        async with McpClient(streamable_http_client(url, http_client=http)) as client:
            yield client


async def call(client, tool: str, /, **arguments):
    """A tool's answer as JSON; fails the test when it is a tool error."""
    result = await client.call_tool(tool, arguments)
    text = result.content[0].text
    assert not result.is_error, f"{tool}: {text}"
    assert result.structured_content == json.loads(text)
    return json.loads(text)


async def call_error(client, tool: str, /, **arguments) -> dict:
    """A tool error's JSON; fails the test when the call succeeded."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, f"{tool} succeeded: {result.content[0].text}"
    return json.loads(result.content[0].text)


async def read(client, uri: str) -> dict:
    result = await client.read_resource(uri)
    assert result.contents[0].mime_type == "application/json"
    return json.loads(result.contents[0].text)


async def agent_flow(client, ops: Client) -> dict:
    """What an agent does through the tools, every tool once at least, checked against the
    HTTP API. Returns the ids it made."""
    session = await call(
        client,
        "session_start",
        identity={"user_name": "Ada", "authority": "employee"},
        environment={"timezone": "Europe/Paris"},
        context_window_tokens=100_000,
        model="claude-sonnet-4-5",
    )
    assert ops.session_get(session["id"]).data["model"] == "claude-sonnet-4-5"
    root = await call(
        client,
        "frame_push",
        session_id=session["id"],
        goal="Plan the offsite",
        budget={"total": 2000},
    )
    assert root["budget"]["total"] == 2000 and root["session_id"] == session["id"]

    over = await call_error(
        client,
        "frame_push",
        session_id=session["id"],
        parent_frame_id=root["id"],
        goal="Too big",
        budget={"total": 5000},
    )
    assert over["error"] == "insufficient_tokens"
    assert (over["requested"], over["available"], over["status"]) == (5000, 2000, 409)
    assert over["detail"]

    child = await call(
        client,
        "frame_push",
        session_id=session["id"],
        parent_frame_id=root["id"],
        goal="Find a venue",
        budget={"total": 500, "max_subframe_depth": None},
        inputs=None,  # null, as hosts send for what the model left out: the default
    )
    assert child["inputs"] == {} and child["parent_frame_id"] == root["id"]
    assert ops.frame_get(root["id"]).budget["subcall_allocation"] == 500

    written = await call(
        client,
        "fact_write",
        key="offsite_budget_v1",
        subject="offsite_budget",
        value={"amount": 12000, "currency": "EUR"},
        source="finance_system",
    )
    assert written["outcome"] == "created"
    assert ops.fact_current("offsite_budget_v1")["value"] == {"amount": 12000, "currency": "EUR"}
    await call(
        client,
        "fact_write",
        key="offsite_budget_v2",
        subject="offsite_budget",
        value={"amount": 15000, "currency": "EUR"},
        source="finance_system",
        supersedes="offsite_budget_v1",
    )
    current = await call(client, "fact_current", key="offsite_budget_v1")
    assert current["key"] == "offsite_budget_v2"
    assert current == ops.fact_current("offsite_budget_v1")
    lineage = await call(client, "fact_lineage", key="offsite_budget_v2")
    assert [v["key"] for v in lineage["chain"]] == ["offsite_budget_v1", "offsite_budget_v2"]

    # Two agents name one meeting differently: proposed, then settled by a decision.
    await call(client, "fact_write", key="meeting_day", value="Tuesday 2pm", source="user")
    raised = await call(
        client, "fact_write", key="sync_meeting", value="Thursday 3pm", source="user"
    )
    (proposal,) = raised["proposed_conflicts"]
    waiting = await call(client, "fact_conflicts")
    assert [c["id"] for c in waiting["items"]] == [proposal["id"]]
    decided = await call(client, "fact_conflict_accept", conflict_id=str(proposal["id"]))
    assert decided["status"] == "accepted"
    assert ops.fact_current("meeting_day")["value"] == "Thursday 3pm"

    await call(
        client, "working_set_put", session_id=session["id"], key="venue", value={"city": "Lyon"}
    )
    item = await call(client, "working_set_get", session_id=session["id"], key="venue")
    assert item["value"] == {"city": "Lyon"}
    assert ops.working_set_get(session["id"], "venue")["value"] == {"city": "Lyon"}

    model_call = {
        "input_tokens": 300,
        "output_tokens": 50,
        "cache_creation_input_tokens": 20,
        "cache_read_input_tokens": 100,
        "model": "claude-sonnet-4-6",
        "message_id": "msg_offsite_1",
    }
    charged = await call(
        client,
        "usage_record",
        frame_id=child["id"],
        **model_call,
        started_at="2026-03-02T09:00:00Z",
        latency_ms=1200,
    )
    assert charged["id"] == child["id"] and charged["budget"]["used"] == 470
    again = await call(client, "usage_record", frame_id=child["id"], **model_call)
    assert again["budget"]["used"] == 470  # a retry of the same answer charges nothing
    calls = ops.request("GET", f"/sessions/{session['id']}/calls")
    assert calls["count"] == 1
    (made_call,) = calls["items"]
    assert made_call["frame_id"] == child["id"] and made_call["model"] == "claude-sonnet-4-6"
    assert (made_call["input_tokens"], made_call["output_tokens"]) == (300, 50)
    assert made_call["latency_ms"] == 1200
    # $3 input, $3.75 cache writes, $0.30 cache reads and $15 output per million tokens.
    assert made_call["cost_usd"] == pytest.approx(0.001755)
    assert ops.session_get(session["id"]).data["cost_usd"] == pytest.approx(0.001755)

    document, brochure = [
        await call(client, "handle_add", frame_id=child["id"], kind="document", **added)
        for added in (
            {"priority": "high", "content": "The Lyon venue seats 80 and costs 9000 EUR."},
            {"ref": "https://example.com/brochure.pdf", "estimated_tokens": 3000, "state": "cold"},
        )
    ]
    assert document["estimated_tokens"] > 0 and document["state"] == "loaded"
    assert brochure["state"] == "cold"

    pack = await call(
        client,
        "context_pack",
        session_id=session["id"],
        frame_id=child["id"],
        budget_tokens=4000,
        query="offsite budget",
    )
    assert pack["token_summary"]["used"] <= 4000
    assert "offsite_budget_v2" in [f["key"] for f in pack["facts"]]
    assert "venue" in [w["key"] for w in pack["working_set"]]
    assert document["id"] in [s["handle_id"] for s in pack["segments"]]
    assert brochure["id"] in [r["handle_id"] for r in pack["resources"]]
    # The tool answers why: every item's rank and score parts, as the API gives them.
    venue = next(s for s in pack["segments"] if s["handle_id"] == document["id"])
    assert venue["reason"] == "ranked" and venue["rank"] >= 1
    assert set(venue["score"]) == {
        "total",
        "priority",
        "lexical",
        "semantic",
        "recency",
        "attention",
        "neighbour",
        "older",
    }

    state = await call(client, "rlm_state_create", prompt="Pick a venue", session_id=session["id"])
    state_id = state["state_id"]
    assert ops.rlm_state_get(state_id)["prompt"] == "Pick a venue"
    await call(client, "rlm_write", state_id=state_id, name="shortlist", value=["Lyon", "Nantes"])
    checkpoint = await call(client, "rlm_checkpoint", state_id=state_id, name="shortlisted")
    await call(client, "rlm_write", state_id=state_id, name="shortlist", value=["Brest"])
    assert (await call(client, "rlm_read", state_id=state_id, name="shortlist"))["value"] == [
        "Brest"
    ]
    await call(client, "rlm_rollback", state_id=state_id, checkpoint_id=checkpoint["checkpoint_id"])
    assert (await call(client, "rlm_read", state_id=state_id, name="shortlist"))["value"] == [
        "Lyon",
        "Nantes",
    ]
    assert ops.rlm_variable_get(state_id, "shortlist")["value"] == ["Lyon", "Nantes"]

    suspension = await call(
        client, "frame_suspend", frame_id=child["id"], reason="Waiting for the venue's answer"
    )
    assert suspension["frame_id"] == child["id"] and suspension["token"]
    resumed = await call(client, "session_resume", session_id=session["id"])
    assert [f["id"] for f in resumed["frame_stack"]][0] == root["id"]
    assert child["id"] in [w["frame_id"] for w in resumed["pending_work"]]
    ops.suspension_resume(suspension["token"])
    popped = await call(
        client, "frame_pop", frame_id=child["id"], status="completed", result_refs=["venue:lyon"]
    )
    assert popped["status"] == "completed"
    assert ops.frame_get(child["id"]).status == "completed"

    summary = await read(client, f"contextops://sessions/{session['id']}")
    assert summary["id"] == session["id"] and summary["top_frame_id"] == root["id"]
    budget = await read(client, f"contextops://frames/{root['id']}/budget")
    assert budget["frame_id"] == root["id"]
    assert budget["budget"] == ops.frame_get(root["id"]).data["budget"]

    ended = await call(client, "session_end", session_id=session["id"])
    assert ended["lifecycle_state"] == "ended" and ended["cost_usd"] == pytest.approx(0.001755)
    assert ops.session_get(session["id"]).data["lifecycle_state"] == "ended"
    assert ops.frame_get(root["id"]).status == "cancelled"
    return {"session_id": session["id"], "root_id": root["id"]}


def assert_tool_list(tools) -> None:
    assert {tool.name for tool in tools} == TOOL_NAMES
    for tool in tools:
        assert tool.input_schema["type"] == "object", tool.name
        assert tool.description and len(tool.description) > 60, tool.name
    schemas = {tool.name: tool.input_schema for tool in tools}
    assert set(schemas["session_start"]["properties"]) >= {
        "identity",
        "environment",
        "context_window_tokens",
        "model",
    }
    assert schemas["frame_push"]["required"] == ["session_id", "goal", "budget"]
    assert schemas["fact_current"]["required"] == ["key"]
    assert schemas["rlm_read"]["required"] == ["state_id", "name"]
    assert schemas["rlm_rollback"]["required"] == ["state_id", "checkpoint_id"]
    assert schemas["usage_record"]["required"] == ["frame_id", "input_tokens", "output_tokens"]
    assert schemas["handle_add"]["required"] == ["frame_id", "kind"]
    assert schemas["session_end"]["required"] == ["session_id"]
    assert schemas["rlm_state_create"]["required"] == ["prompt"]


def test_missing_arguments_are_named_once_each():
    from contextops_client.mcp import TOOLS_BY_NAME, InvalidArguments

    with pytest.raises(InvalidArguments) as caught:
        TOOLS_BY_NAME["frame_push"].request({"session_id": "s"})
    assert str(caught.value).endswith(": Invalid arguments: budget, goal.")
    assert caught.value.body["errors"] == [
        {"loc": ["arguments", "budget"], "msg": "Field required"},
        {"loc": ["arguments", "goal"], "msg": "Field required"},
    ]


def _resolver(schema: dict):
    """Reads a node of the API's OpenAPI ``schema`` through its ``$ref`` (and an optional
    field's ``anyOf`` as its one type)."""
    components = schema["components"]["schemas"]

    def resolve(node: dict) -> dict:
        while "$ref" in node:
            node = components[node["$ref"].rsplit("/", 1)[-1]]
        options = [o for o in node.get("anyOf", []) if o.get("type") != "null"]
        return resolve(options[0]) if len(options) == 1 else node

    return resolve


def test_each_tool_takes_its_operations_path_parameters_and_body_fields():
    schema = api.get_openapi_schema()
    resolve = _resolver(schema)
    assert {tool.name for tool in TOOLS} == TOOL_NAMES
    for tool in TOOLS:
        operation = schema["paths"][f"/api/v1{tool.path}"][tool.method.lower()]
        path_params = {p["name"] for p in operation.get("parameters", []) if p["in"] == "path"}
        assert path_params == set(tool.path_params), tool.name
        body = operation.get("requestBody")
        fields = resolve(body["content"]["application/json"]["schema"]) if body else {}
        assert set(tool.body) == set(fields.get("properties", {})), tool.name
        assert set(tool.required) == set(fields.get("required", [])), tool.name
        assert set(tool.input_schema().get("required", [])) == path_params | set(tool.required)


def test_a_bound_a_tool_states_is_the_apis_own():
    """A tool never tells the model a figure the API would refuse (or one it would not)."""
    schema = api.get_openapi_schema()
    resolve = _resolver(schema)
    stated = 0
    for tool in TOOLS:
        operation = schema["paths"][f"/api/v1{tool.path}"][tool.method.lower()]
        body = operation.get("requestBody")
        if not body:
            continue
        fields = resolve(body["content"]["application/json"]["schema"])["properties"]
        for name, field in tool.input_schema()["properties"].items():
            for bound in ("minimum", "maximum"):
                if bound in field:
                    assert field[bound] == resolve(fields[name]).get(bound), (tool.name, name)
                    stated += 1
    assert stated >= 5


# -- stdio -----------------------------------------------------------------------------------


def test_it_serves_every_tool_over_stdio_against_the_api(agent, ops, prices):
    async def run():
        async with McpClient(stdio_server(agent)) as client:
            assert_tool_list((await client.list_tools()).tools)
            templates = (await client.list_resource_templates()).resource_templates
            assert {t.uri_template for t in templates} == {
                "contextops://sessions/{session_id}",
                "contextops://frames/{frame_id}/budget",
            }
            made = await agent_flow(client, ops)
            listed = (await client.list_resources()).resources
            assert f"contextops://sessions/{made['session_id']}" in [str(r.uri) for r in listed]

    asyncio.run(run())


def test_the_pack_tool_lists_the_best_dropped_items_unless_asked_for_all(agent, ops):
    """An agent reads the tool's answer in its window: on a frame of many handles the
    items left out are listed by the ten closest to getting in, and counted."""
    session = ops.session_create(title="Many notes")
    frame = ops.frame_push(session, goal="Read the notes", budget=100_000)
    for n in range(40):
        ops.handle_add(frame, kind="document", content=f"Note {n}: " + "the venue list. " * 20)
    api_pack = ops.context_pack(session, frame=frame, budget_tokens=600)
    assert len(api_pack["dropped"]) > 20

    async def run():
        async with McpClient(stdio_server(agent)) as client:
            best = await call(
                client, "context_pack", session_id=session.id, frame_id=frame.id, budget_tokens=600
            )
            every = await call(
                client,
                "context_pack",
                session_id=session.id,
                frame_id=frame.id,
                budget_tokens=600,
                dropped="all",
            )
            wrong = await call_error(
                client, "context_pack", session_id=session.id, budget_tokens=600, dropped="some"
            )
        return best, every, wrong

    best, every, wrong = asyncio.run(run())
    ranks = [d["rank"] for d in api_pack["dropped"] if d["rank"] is not None]
    assert [d["rank"] for d in best["dropped"]] == sorted(ranks)[:10]
    assert best["dropped_total"] == len(api_pack["dropped"])
    assert sum(best["dropped_by_reason"].values()) == len(api_pack["dropped"])
    assert len(json.dumps(best["dropped"])) * 3 < len(json.dumps(api_pack["dropped"]))
    assert [d["id"] for d in every["dropped"]] == [d["id"] for d in api_pack["dropped"]]
    assert "dropped_total" not in every
    assert (wrong["error"], wrong["errors"][0]["loc"]) == (
        "validation_error",
        ["arguments", "dropped"],
    )


def test_api_errors_arrive_as_tool_errors_with_their_code(agent, ops, make_agent):
    other = ops.session_create(title="Acme's")
    outsider = make_agent(org="Globex", agent="outsider")

    async def run():
        async with McpClient(stdio_server(agent, key=outsider.key)) as client:
            for name, arguments in (
                ("session_resume", {"session_id": other.id}),
                ("frame_push", {"session_id": other.id, "goal": "x", "budget": {"total": 10}}),
                ("fact_current", {"key": "no_such_fact"}),
            ):
                error = await call_error(client, name, **arguments)
                assert (error["error"], error["status"]) == ("not_found", 404), name
                assert error["detail"]
            unknown = await call_error(
                client, "session_start", model="m", colour="blue", context_window_tokens=5000
            )
            assert (unknown["error"], unknown["status"]) == ("validation_error", 422)
            assert unknown["errors"] == [
                {"loc": ["arguments", "colour"], "msg": "Extra inputs are not permitted"}
            ]
            nested = await call_error(client, "session_start", identity={"nickname": "Ada"})
            assert nested["errors"][0]["loc"] == ["arguments", "identity", "nickname"]
            too_small = await call_error(client, "session_start", context_window_tokens=10)
            assert too_small["errors"][0]["loc"] == ["arguments", "context_window_tokens"]
            missing = await call_error(client, "frame_pop", status="completed")
            assert missing["error"] == "validation_error"
            assert missing["errors"][0]["loc"] == ["arguments", "frame_id"]
            with pytest.raises(MCPError) as caught:
                await client.read_resource(f"contextops://sessions/{other.id}")
            assert caught.value.data["error"] == "not_found"

    asyncio.run(run())
    assert ops.session_get(other).data["lifecycle_state"] == "loading"  # nothing changed
    with Client(outsider.url, outsider.key) as theirs:
        assert theirs.sessions()["count"] == 0


def test_bad_usage_handles_and_states_answer_the_apis_errors(agent, ops, make_agent):
    session = ops.session_create(title="Offsite")
    frame = ops.frame_push(session, goal="Plan", budget=1000)
    other = make_agent(org="Globex", agent="outsider")
    with Client(other.url, other.key) as theirs:
        their_session = theirs.session_create(title="Globex's")

    async def run():
        async with McpClient(stdio_server(agent)) as client:
            negative = await call_error(
                client, "usage_record", frame_id=frame.id, input_tokens=-1, output_tokens=5
            )
            assert (negative["error"], negative["status"]) == ("validation_error", 422)
            assert negative["errors"][0]["loc"] == ["arguments", "input_tokens"]
            missing = await call_error(client, "usage_record", frame_id=frame.id, input_tokens=5)
            assert missing["errors"] == [
                {"loc": ["arguments", "output_tokens"], "msg": "Field required"}
            ]
            nowhere = await call_error(
                client, "usage_record", frame_id="no-such-frame", input_tokens=1, output_tokens=1
            )
            assert (nowhere["error"], nowhere["status"]) == ("not_found", 404)

            empty = await call_error(client, "handle_add", frame_id=frame.id, kind="document")
            assert (empty["error"], empty["status"]) == ("validation_error", 422)
            unknown_kind = await call_error(
                client, "handle_add", frame_id=frame.id, kind="pdf", content="x"
            )
            assert unknown_kind["errors"][0]["loc"] == ["arguments", "kind"]

            no_prompt = await call_error(client, "rlm_state_create", session_id=session.id)
            assert no_prompt["errors"] == [
                {"loc": ["arguments", "prompt"], "msg": "Field required"}
            ]
            theirs = await call_error(
                client, "rlm_state_create", prompt="Spy", session_id=their_session.id
            )
            assert (theirs["error"], theirs["status"]) == ("not_found", 404)

            await call(client, "session_end", session_id=session.id)
            late = await call_error(
                client, "usage_record", frame_id=frame.id, input_tokens=10, output_tokens=5
            )
            assert (late["error"], late["status"]) == ("session_ended", 409)
            twice = await call_error(client, "session_end", session_id=session.id)
            assert (twice["error"], twice["status"]) == ("session_ended", 409)

    asyncio.run(run())
    assert ops.request("GET", f"/sessions/{session.id}/calls")["count"] == 0
    assert ops.rlm_states()["count"] == 0


def test_a_bad_key_over_stdio_answers_unauthenticated_tool_errors(agent):
    async def run():
        async with McpClient(stdio_server(agent, key="co_not_a_real_key")) as client:
            error = await call_error(client, "fact_current", key="anything")
            assert (error["error"], error["status"]) == ("unauthenticated", 401)

    asyncio.run(run())


def test_an_unreachable_server_is_a_tool_error_not_a_crash(agent):
    params = stdio_server(agent)
    params.env["CONTEXTOPS_URL"] = f"http://127.0.0.1:{free_port()}"

    async def run():
        async with McpClient(params) as client:
            error = await call_error(client, "fact_current", key="anything")
            assert error["error"] == "connection_error" and "status" not in error
            assert (await client.list_tools()).tools  # still serving

    asyncio.run(run())


def test_the_client_works_without_the_mcp_extra_and_says_what_to_install():
    code = f"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {{"mcp", "mcp_types", "django", "contextops"}}:
            raise ImportError("blocked: " + name, name=name)
sys.meta_path.insert(0, Block())
sys.path.insert(0, {str(CLIENT_ROOT)!r})
import contextops_client
from contextops_client.cli import main
sys.argv = ["contextops", "--api-key", "k", "mcp"]
main()
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert 'pip install "contextops-client[mcp]"' in done.stderr
    assert "Traceback" not in done.stderr


def test_it_refuses_to_start_over_stdio_without_a_key(agent):
    env = {**os.environ, "CONTEXTOPS_URL": agent.url}
    env.pop("CONTEXTOPS_API_KEY", None)
    done = subprocess.run(
        [sys.executable, "-m", "contextops_client.cli", "mcp"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert "CONTEXTOPS_API_KEY" in done.stderr


# -- Streamable HTTP ---------------------------------------------------------------------


def test_it_serves_every_tool_over_http_with_the_callers_own_key(agent, ops, prices, http_server):
    async def run():
        async with http_client(http_server, agent.key) as client:
            assert_tool_list((await client.list_tools()).tools)
            return await agent_flow(client, ops)

    made = asyncio.run(run())
    session = ops.session_get(made["session_id"])
    assert session.data["agent"] == agent.agent.name  # the caller's key made it


def test_each_http_caller_acts_with_its_own_key(agent, ops, make_agent, http_server):
    outsider = make_agent(org="Globex", agent="outsider")
    mine = ops.session_create(title="Acme's")

    async def run():
        async with http_client(http_server, outsider.key) as client:
            error = await call_error(client, "session_resume", session_id=mine.id)
            assert error["error"] == "not_found"
            theirs = await call(client, "session_start", model="m")
        async with http_client(http_server, agent.key) as client:
            assert (await call(client, "session_resume", session_id=mine.id))["frame_stack"] == []
        return theirs

    theirs = asyncio.run(run())
    assert ops.sessions()["count"] == 1  # Globex's session is not Acme's
    assert theirs["agent"] == "outsider"


@pytest.mark.parametrize("key", [None, "co_not_a_real_key"])
def test_http_without_a_valid_key_is_refused_before_any_tool(agent, ops, http_server, key):
    headers = {"Accept": "application/json, text/event-stream"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    call_body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "session_start", "arguments": {"model": "m"}},
    }
    answer = httpx.post(http_server, json=call_body, headers=headers, timeout=30)
    assert answer.status_code == 401
    assert ops.sessions()["count"] == 0

    async def run():
        async with http_client(http_server, key) as client:
            await client.list_tools()

    with pytest.raises(BaseExceptionGroup) as caught:  # the SDK's own client is refused too
        asyncio.run(run())
    assert caught.group_contains(MCPError)
    assert ops.sessions()["count"] == 0
