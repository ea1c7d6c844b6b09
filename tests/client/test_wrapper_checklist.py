"""The SDK wrappers' integration checklist steps (seed 000 §7): a context pack before each
call (``context_pack=N``) and tool results as handles of the paying frame
(``record_tool_results=True``). The real SDKs against tests/fakes/, the real contextops
server behind the live server fixture."""

import asyncio
import json

import anthropic
import openai
import pytest
from contextops_client import AsyncClient, BudgetTooSmall, Conflict, InsufficientTokens
from contextops_client.anthropic import estimate_tokens
from contextops_client.anthropic import wrap as wrap_anthropic
from contextops_client.openai import wrap as wrap_openai

from frames.models import ContextHandle
from tests.fakes.anthropic_server import AnthropicFakeServer
from tests.fakes.anthropic_server import Reply as AReply
from tests.fakes.openai_server import OpenAIFakeServer
from tests.fakes.openai_server import Reply as OReply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.xdist_group("live")]

ADA = {"user_name": "Ada Lovelace", "user_id": "u-ada", "authority": "employee"}
PACK_OPEN, PACK_CLOSE = "<contextops_context>", "</contextops_context>"


@pytest.fixture
def afake():
    with AnthropicFakeServer() as server:
        yield server


@pytest.fixture
def claude_sdk(afake):
    client = anthropic.Anthropic(base_url=afake.base_url, api_key="test", max_retries=0)
    yield client
    client.close()


@pytest.fixture
def ofake():
    with OpenAIFakeServer() as server:
        yield server


@pytest.fixture
def gpt_sdk(ofake):
    client = openai.OpenAI(base_url=ofake.base_url, api_key="test", max_retries=0)
    yield client
    client.close()


def _user(text):
    return {"role": "user", "content": text}


def _tool_use(tool_id, name, args):
    return {"type": "tool_use", "id": tool_id, "name": name, "input": args}


def _tool_result(tool_id, content, is_error=False):
    return {"type": "tool_result", "tool_use_id": tool_id, "content": content, "is_error": is_error}


def _pack_of(text):
    """The pack part of a system prompt sent to the model."""
    assert text.count(PACK_OPEN) == 1 and text.count(PACK_CLOSE) == 1, text
    return text[text.index(PACK_OPEN) : text.index(PACK_CLOSE) + len(PACK_CLOSE)]


def _tool_handles(frame):
    return list(
        ContextHandle.objects.filter(frame_id=frame.id, kind="tool_result").order_by("created_at")
    )


# -- Anthropic: the context pack -------------------------------------------------------------


def test_the_pack_goes_into_system_after_the_caller_s_own_prompt(ops, claude_sdk, afake):
    session = ops.session(identity=ADA)
    ops.fact_write(
        "tls.min_version",
        "TLS 1.2 at least",
        source="user",
        scope="session",
        scope_id=session.id,
    )
    claude = wrap_anthropic(claude_sdk, ops, session, context_pack=2_000)
    afake.script(AReply.message("Use TLS 1.3."))
    with ops.frame(session, goal="Harden the web server", budget=20_000) as root:
        with ops.frame(session, goal="Pick the TLS versions", budget=10_000) as frame:
            claude.messages.create(
                model="claude-fake",
                max_tokens=100,
                system="You are a terse security reviewer.",
                messages=[_user("Which TLS versions should we allow?")],
            )
    system = afake.message_requests[0].body["system"]
    # the caller's prompt first, as it was; then the pack
    assert system.startswith("You are a terse security reviewer.\n\n" + PACK_OPEN)
    assert system.endswith(PACK_CLOSE)
    pack = _pack_of(system)
    assert "## Brief\nUser: Ada Lovelace (u-ada); authority: employee" in pack
    assert "## Facts\n- tls.min_version: TLS 1.2 at least" in pack
    assert (
        "## Frames (root first; the last is the current one)\n"
        "- Harden the web server (waiting)\n"
        "  - Pick the TLS versions (active)"
    ) in pack
    # assembled for the paying frame, ranked by the question
    [record] = ops.context_packs(session)
    assert record["frame_id"] == frame.id != root.id
    assert record["query"] == "Which TLS versions should we allow?"
    assert claude.contextops.last_pack["id"] == record["id"]
    # the pack is context, not conversation: the turn holds the user's words only
    [turn] = ops.turns(session)
    assert turn["user_message"] == "Which TLS versions should we allow?"
    assert PACK_OPEN not in json.dumps(afake.message_requests[0].body["messages"])


def test_a_fact_written_between_two_calls_is_in_the_second_call_s_system(ops, claude_sdk, afake):
    session = ops.session(identity=ADA)
    claude = wrap_anthropic(claude_sdk, ops, session, context_pack=1_000)
    cached = [{"type": "text", "text": "House rules.", "cache_control": {"type": "ephemeral"}}]
    afake.script(AReply.message("Noted."), AReply.message("Blue it is."))
    history = [_user("What colour should the dashboard be?")]
    with ops.frame(session, goal="Design", budget=20_000):
        reply = claude.messages.create(
            model="claude-fake", max_tokens=50, system=cached, messages=history
        )
        ops.fact_write("brand.colour", "blue", source="user", scope="session", scope_id=session.id)
        history += [{"role": "assistant", "content": reply.content}, _user("And the colour?")]
        claude.messages.create(model="claude-fake", max_tokens=50, system=cached, messages=history)
    first, second = (r.body["system"] for r in afake.message_requests)
    # a list of blocks keeps the caller's blocks (and their cache markers) first
    assert first[0] == second[0] == cached[0]
    assert len(first) == len(second) == 2
    assert "brand.colour" not in first[1]["text"]
    assert "- brand.colour: blue" in _pack_of(second[1]["text"])
    assert [r["query"] for r in ops.context_packs(session)] == [
        "And the colour?",
        "What colour should the dashboard be?",
    ]


def test_the_pack_counts_in_the_estimate_and_a_frame_that_cannot_pay_for_it_refuses(
    ops, claude_sdk, afake
):
    session = ops.session(identity=ADA)
    ops.fact_write(
        "incident.notes",
        "The outage started in the eu-west load balancer. " * 20,
        source="user",
        scope="session",
        scope_id=session.id,
    )
    messages = [_user("Summarise the incident.")]
    call = dict(model="claude-fake", max_tokens=900, messages=messages)
    assert estimate_tokens(call) < 1_000  # the call alone fits the frame
    with ops.frame(session, goal="Incident", budget=1_000):
        with pytest.raises(InsufficientTokens) as caught:
            wrap_anthropic(claude_sdk, ops, session, context_pack=1_000).messages.create(**call)
        assert afake.requests == []
        assert caught.value.available == 1_000
        assert caught.value.requested > 1_000 > estimate_tokens(call)
        # the same call without the pack is paid for and sent
        afake.script(AReply.message("Load balancer."))
        wrap_anthropic(claude_sdk, ops, session).messages.create(**call)
    assert len(afake.message_requests) == 1
    assert "system" not in afake.message_requests[0].body


def test_a_pack_the_server_refuses_sends_nothing(ops, claude_sdk, afake):
    session = ops.session()
    with ops.frame(session, goal="Policies", budget=50_000) as frame:
        for name in ("policy", "safety", "legal"):
            frame.handle("document", content=f"{name} " * 300, priority="critical")
        claude = wrap_anthropic(claude_sdk, ops, session, context_pack=600)
        with pytest.raises(Conflict) as caught:
            claude.messages.create(model="claude-fake", max_tokens=10, messages=[_user("hi")])
        assert caught.value.code == "critical_exceeds_budget"
        assert caught.value.body["budget_tokens"] == 600
        with pytest.raises(Conflict):  # the stream helper refuses the same way
            claude.messages.stream(model="claude-fake", max_tokens=10, messages=[_user("hi")])
        too_small = wrap_anthropic(claude_sdk, ops, session, context_pack=100)
        with pytest.raises(BudgetTooSmall):
            too_small.messages.create(model="claude-fake", max_tokens=10, messages=[_user("hi")])
        assert frame.refresh().budget["used"] == 0
    assert afake.requests == []
    assert ops.turns(session) == []


def test_a_streamed_call_carries_the_pack_too(ops, claude_sdk, afake):
    session = ops.session(identity=ADA)
    claude = wrap_anthropic(claude_sdk, ops, session, context_pack=800)
    afake.script(AReply.message("Streamed."), AReply.message("Raw events."))
    with ops.frame(session, goal="Stream with context", budget=10_000):
        with claude.messages.stream(
            model="claude-fake", max_tokens=20, messages=[_user("stream it")]
        ) as stream:
            assert "".join(stream.text_stream) == "Streamed."
        events = claude.messages.create(
            model="claude-fake", max_tokens=20, messages=[_user("raw")], stream=True
        )
        list(events)
    for request in afake.message_requests:
        assert "User: Ada Lovelace" in _pack_of(request.body["system"])
        assert request.body["system"].startswith(PACK_OPEN)  # no prompt of the caller's
    assert [t["assistant_response"] for t in ops.turns(session)] == ["Streamed.", "Raw events."]


# -- Anthropic: tool results as handles ----------------------------------------------------------


def test_tool_results_become_handles_of_the_current_frame_once(ops, claude_sdk, afake):
    session = ops.session()
    claude = wrap_anthropic(claude_sdk, ops, session, record_tool_results=True)
    afake.script(
        AReply.message(
            content=[
                _tool_use("toolu_paris", "weather", {"city": "Paris"}),
                _tool_use("toolu_atlantis", "weather", {"city": "Atlantis"}),
            ],
            stop_reason="tool_use",
        ),
        AReply.message("Paris is sunny."),
        AReply.message(content=[_tool_use("toolu_fx", "exchange_rate", {"pair": "EURUSD"})]),
        AReply.message("1.08."),
    )
    history = [_user("Weather in Paris and Atlantis?")]
    with ops.frame(session, goal="Travel", budget=50_000) as outer:
        first = claude.messages.create(model="claude-fake", max_tokens=100, messages=history)
        assert _tool_handles(outer) == []  # nothing to add before a result exists
        history += [
            {"role": "assistant", "content": first.content},
            {
                "role": "user",
                "content": [
                    _tool_result("toolu_paris", "sunny, 24 C"),
                    _tool_result(
                        "toolu_atlantis", [{"type": "text", "text": "unknown city"}], True
                    ),
                ],
            },
        ]
        second = claude.messages.create(model="claude-fake", max_tokens=100, messages=history)
        history += [{"role": "assistant", "content": second.content}, _user("And EUR to USD?")]
        with ops.frame(session, goal="Exchange rate", budget=10_000) as inner:
            third = claude.messages.create(model="claude-fake", max_tokens=100, messages=history)
            history += [
                {"role": "assistant", "content": third.content},
                {"role": "user", "content": [_tool_result("toolu_fx", "1.08")]},
            ]
            claude.messages.create(model="claude-fake", max_tokens=100, messages=history)
    # each result once, on the frame that paid for the call that sent it
    outer_handles = _tool_handles(outer)
    assert [(h.tool_call_id, h.category, h.priority, h.content) for h in outer_handles] == [
        ("toolu_paris", "weather", "medium", "sunny, 24 C"),
        ("toolu_atlantis", "weather", "medium", "unknown city"),
    ]
    assert [(h.tool_call_id, h.category, h.content) for h in _tool_handles(inner)] == [
        ("toolu_fx", "exchange_rate", "1.08")
    ]
    assert claude.contextops.tool_handles == {
        h.tool_call_id: str(h.id) for h in [*outer_handles, *_tool_handles(inner)]
    }
    assert len(afake.message_requests) == 4
    # the conversation is recorded as without the flag
    turns = ops.turns(session)
    assert turns[0]["tool_results"][0] == {
        "tool_use_id": "toolu_paris",
        "output": "sunny, 24 C",
        "is_error": False,
    }


def test_a_refused_call_adds_no_tool_result_handle(ops, claude_sdk, afake):
    session = ops.session()
    claude = wrap_anthropic(claude_sdk, ops, session, record_tool_results=True)
    history = [
        _user("Look it up"),
        {"role": "assistant", "content": [_tool_use("toolu_1", "search", {"q": "x"})]},
        {"role": "user", "content": [_tool_result("toolu_1", "found it")]},
    ]
    with ops.frame(session, goal="Tiny", budget=50) as frame:
        with pytest.raises(InsufficientTokens):
            claude.messages.create(model="claude-fake", max_tokens=1_000, messages=history)
        assert _tool_handles(frame) == []
    assert afake.requests == []


def test_with_both_flags_the_pack_leaves_out_the_tool_results_the_call_sends(
    ops, claude_sdk, afake
):
    session = ops.session()
    claude = wrap_anthropic(claude_sdk, ops, session, context_pack=2_000, record_tool_results=True)
    afake.script(
        AReply.message(content=[_tool_use("toolu_log", "read_log", {"path": "app.log"})]),
        AReply.message("The disk is full."),
        AReply.message("Rotate the logs."),
        AReply.message("Then restart the job."),
    )
    history = [_user("Why did the job fail?")]
    with ops.frame(session, goal="Debug", budget=50_000) as frame:
        first = claude.messages.create(model="claude-fake", max_tokens=100, messages=history)
        history += [
            {"role": "assistant", "content": first.content},
            {"role": "user", "content": [_tool_result("toolu_log", "ENOSPC: disk full")]},
        ]
        second = claude.messages.create(model="claude-fake", max_tokens=100, messages=history)
        assert len(_tool_handles(frame)) == 1
        history += [{"role": "assistant", "content": second.content}, _user("What now?")]
        claude.messages.create(model="claude-fake", max_tokens=100, messages=history)
        # an agent that trimmed its history: the result now comes from the pack
        claude.messages.create(
            model="claude-fake", max_tokens=100, messages=[_user("What should I do?")]
        )
    third, fourth = afake.message_requests[2:]
    assert "ENOSPC" in json.dumps(third.body["messages"])
    assert "ENOSPC" not in third.body["system"]  # the model has it in the messages
    assert "ENOSPC" not in json.dumps(fourth.body["messages"])
    assert "### tool_result · medium\nENOSPC: disk full" in _pack_of(fourth.body["system"])


def test_both_flags_off_sends_and_stores_nothing_more(ops, claude_sdk, afake):
    session = ops.session(identity=ADA)
    claude = wrap_anthropic(claude_sdk, ops, session)
    afake.script(AReply.message(content=[_tool_use("toolu_1", "search", {})]), AReply.message())
    history = [_user("Search")]
    with ops.frame(session, goal="Plain", budget=10_000) as frame:
        first = claude.messages.create(model="claude-fake", max_tokens=10, messages=history)
        history += [
            {"role": "assistant", "content": first.content},
            {"role": "user", "content": [_tool_result("toolu_1", "result")]},
        ]
        claude.messages.create(model="claude-fake", max_tokens=10, messages=history)
        assert _tool_handles(frame) == []
    assert all("system" not in r.body for r in afake.message_requests)
    assert ops.context_packs(session) == []
    assert claude.contextops.last_pack is None


def test_the_flags_are_checked_when_wrapping(ops, claude_sdk):
    session = ops.session()
    with pytest.raises(TypeError):
        wrap_anthropic(claude_sdk, ops, session, context_pack="4000")
    with pytest.raises(TypeError):
        wrap_anthropic(claude_sdk, ops, session, context_pack=True)
    with pytest.raises(ValueError):
        wrap_anthropic(claude_sdk, ops, session, context_pack=0)


def test_the_async_wrapper_takes_both_steps(agent, afake):
    async def run():
        async with AsyncClient(agent.url, agent.key) as ops:
            session = await ops.session(identity=ADA)
            sdk = anthropic.AsyncAnthropic(base_url=afake.base_url, api_key="test", max_retries=0)
            claude = wrap_anthropic(sdk, ops, session, context_pack=1_000, record_tool_results=True)
            afake.script(
                AReply.message(content=[_tool_use("toolu_a", "lookup", {})]),
                AReply.message("Streamed answer."),
            )
            history = [_user("Look it up")]
            async with ops.frame(session, goal="Async", budget=20_000) as frame:
                first = await claude.messages.create(
                    model="claude-fake", max_tokens=20, messages=history
                )
                history += [
                    {"role": "assistant", "content": first.content},
                    {"role": "user", "content": [_tool_result("toolu_a", "async result")]},
                ]
                async with claude.messages.stream(
                    model="claude-fake", max_tokens=20, messages=history
                ) as stream:
                    await stream.get_final_message()
            await sdk.close()
            return frame

    frame = asyncio.run(run())
    for request in afake.message_requests:
        assert "User: Ada Lovelace" in _pack_of(request.body["system"])
    assert [(h.tool_call_id, h.category, h.content) for h in _tool_handles(frame)] == [
        ("toolu_a", "lookup", "async result")
    ]


# -- OpenAI ------------------------------------------------------------------------------------


def _calls(*calls):
    return [{"id": i, "name": name, "arguments": json.dumps(args)} for i, name, args in calls]


def test_a_chat_completion_gets_the_pack_as_a_system_message_and_records_tool_results(
    ops, gpt_sdk, ofake
):
    session = ops.session(identity=ADA)
    ops.fact_write("home.city", "Paris", source="user", scope="session", scope_id=session.id)
    gpt = wrap_openai(gpt_sdk, ops, session, context_pack=1_500, record_tool_results=True)
    ofake.script(
        OReply.message("", tool_calls=_calls(("call_1", "weather", {"city": "Paris"}))),
        OReply.message("Sunny."),
        OReply.message("You are welcome."),
    )
    history = [
        {"role": "system", "content": "You are a weather bot."},
        _user("Weather at home?"),
    ]
    with ops.frame(session, goal="Weather", budget=50_000) as frame:
        first = gpt.chat.completions.create(model="gpt-fake", messages=history)
        history += [
            first.choices[0].message,
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 24 C"},
        ]
        second = gpt.chat.completions.create(model="gpt-fake", messages=history)
        history += [second.choices[0].message, _user("Thanks!")]
        gpt.chat.completions.create(model="gpt-fake", messages=history)
    for request in ofake.chat_requests:
        sent = request.body["messages"]
        # the caller's system message first, then the pack, then the conversation
        assert sent[0] == {"role": "system", "content": "You are a weather bot."}
        assert sent[1]["role"] == "system"
        assert "- home.city: Paris" in _pack_of(sent[1]["content"])
        assert sent[2]["role"] == "user"
    # the third call still sends the tool message: its handle is not in the pack
    assert "sunny, 24 C" in json.dumps(ofake.chat_requests[2].body["messages"][2:])
    assert "sunny, 24 C" not in ofake.chat_requests[2].body["messages"][1]["content"]
    assert [(h.tool_call_id, h.category, h.content) for h in _tool_handles(frame)] == [
        ("call_1", "weather", "sunny, 24 C")
    ]
    assert [r["query"] for r in ops.context_packs(session)] == [
        "Thanks!",
        "Weather at home?",
        "Weather at home?",
    ]
    # the pack is not conversation
    assert [t["user_message"] for t in ops.turns(session)] == ["Weather at home?", "Thanks!"]


def test_a_response_gets_the_pack_after_its_instructions(ops, gpt_sdk, ofake):
    session = ops.session(identity=ADA)
    gpt = wrap_openai(gpt_sdk, ops, session, context_pack=1_000, record_tool_results=True)
    ofake.script(
        OReply.message("", tool_calls=_calls(("fc_1", "weather", {"city": "Lima"}))),
        OReply.message("Foggy."),
        OReply.message("Bring a coat."),
    )
    items = [_user("Weather in Lima?")]
    with ops.frame(session, goal="Responses", budget=50_000) as frame:
        first = gpt.responses.create(model="gpt-fake", input=items, instructions="Be brief.")
        items += [
            *first.output,
            {"type": "function_call_output", "call_id": "fc_1", "output": "foggy, 16 C"},
        ]
        second = gpt.responses.create(model="gpt-fake", input=items, instructions="Be brief.")
        gpt.responses.create(
            model="gpt-fake", input="Do I need a coat?", previous_response_id=second.id
        )
    first_sent, second_sent, third_sent = (r.body for r in ofake.responses_requests)
    assert first_sent["instructions"].startswith("Be brief.\n\n" + PACK_OPEN)
    assert "User: Ada Lovelace" in _pack_of(first_sent["instructions"])
    assert third_sent["instructions"].startswith(PACK_OPEN)  # no instructions of its own
    # the stored response the third call continues holds the result: not in the pack
    assert "foggy" not in third_sent["instructions"]
    assert [(h.tool_call_id, h.category, h.content) for h in _tool_handles(frame)] == [
        ("fc_1", "weather", "foggy, 16 C")
    ]


def test_an_openai_call_whose_pack_is_refused_sends_nothing(ops, gpt_sdk, ofake):
    session = ops.session()
    with ops.frame(session, goal="Policies", budget=50_000) as frame:
        for name in ("policy", "safety", "legal"):
            frame.handle("document", content=f"{name} " * 300, priority="critical")
        gpt = wrap_openai(gpt_sdk, ops, session, context_pack=600)
        with pytest.raises(Conflict) as caught:
            gpt.chat.completions.create(model="gpt-fake", messages=[_user("hi")])
        assert caught.value.code == "critical_exceeds_budget"
        with pytest.raises(Conflict):
            gpt.responses.create(model="gpt-fake", input="hi")
    assert ofake.requests == []
    assert ops.turns(session) == []


def test_openai_with_both_flags_off_sends_what_the_caller_gave(ops, gpt_sdk, ofake):
    session = ops.session(identity=ADA)
    gpt = wrap_openai(gpt_sdk, ops, session)
    history = [_user("Hi")]
    with ops.frame(session, goal="Plain", budget=10_000) as frame:
        gpt.chat.completions.create(model="gpt-fake", messages=history)
        gpt.responses.create(model="gpt-fake", input="Hi")
        assert _tool_handles(frame) == []
    assert ofake.chat_requests[0].body["messages"] == history
    assert "instructions" not in ofake.responses_requests[0].body
    assert ops.context_packs(session) == []


def test_the_async_openai_wrapper_takes_both_steps(agent, ofake):
    async def run():
        async with AsyncClient(agent.url, agent.key) as ops:
            session = await ops.session(identity=ADA)
            sdk = openai.AsyncOpenAI(base_url=ofake.base_url, api_key="test", max_retries=0)
            gpt = wrap_openai(sdk, ops, session, context_pack=1_000, record_tool_results=True)
            ofake.script(
                OReply.message("", tool_calls=_calls(("call_a", "lookup", {}))),
                OReply.message("Done."),
            )
            history = [_user("Look it up")]
            async with ops.frame(session, goal="Async", budget=20_000) as frame:
                first = await gpt.chat.completions.create(model="gpt-fake", messages=history)
                history += [
                    first.choices[0].message,
                    {"role": "tool", "tool_call_id": "call_a", "content": "async result"},
                ]
                await gpt.chat.completions.create(model="gpt-fake", messages=history)
            await sdk.close()
            return frame

    frame = asyncio.run(run())
    for request in ofake.chat_requests:
        assert "User: Ada Lovelace" in _pack_of(request.body["messages"][0]["content"])
    assert [(h.tool_call_id, h.category, h.content) for h in _tool_handles(frame)] == [
        ("call_a", "lookup", "async result")
    ]
