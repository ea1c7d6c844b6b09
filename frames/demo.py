"""The demo organization `make run` loads: a realistic research session, through the services.

Every row is written by the same services the API calls, so the demo's event log
replays to exactly its tables and the pages show what an agent's work really produces.
"""

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.db import transaction
from django.utils import timezone

from contextops.actors import agent_actor
from contextops.llm import ExtractiveSummarizer
from contextops.models import ApiKey, Organization
from contextops.tenancy import api_key_create, user_create
from facts.services import fact_write
from frames.services.handles import handle_add
from frames.services.sessions import session_create
from frames.services.stack import frame_pop, frame_push, frame_reserve
from frames.services.usage import usage_record

from .context import lifecycle
from .context.pack import context_pack_assemble
from .conversation.compaction import compaction_execute
from .conversation.ingest import contents_counted, messages_append
from .models import Event, Frame, Session, Usage
from .rlm.protocol import state_initialize, variable_write
from .rlm.snapshots import checkpoint_create
from .suspensions.services import suspension_create

DEMO_ORG = "Demo"
DEMO_USER = "demo"


@dataclass
class Demo:
    organization: Organization
    session: Session
    api_key: str
    created: bool


# What the demo's agents read and say (``demo.json``, shipped in the package): the RFC's
# sections, the coding session's tests and turns, the facts and a conversation.
DATA: dict[str, Any] = json.loads(Path(__file__).with_name("demo.json").read_text())


def _usage(session, frame, input_tokens, output_tokens, cache_read=0, cache_write=0):
    """One model call of the demo, timed as a real one would be: one call every 20 s from
    four minutes ago, each taking about 0.6 s plus 12 ms per output token."""
    latency_ms = 600 + 12 * output_tokens
    calls = Usage.objects.filter(session=session).count()
    started_at = timezone.now() - timedelta(minutes=4) + timedelta(seconds=20 * calls)
    usage_record(
        session=session,
        frame=frame,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cache_read_input_tokens=cache_read,
        cache_creation_input_tokens=cache_write,
        model="claude-sonnet-4-5",
        actor=agent_actor(session.agent) if session.agent else "",  # the session's own agent
        started_at=started_at,
        latency_ms=latency_ms,
    )


def _research_session(org, agent) -> Session:
    actor = "agent:research-agent"
    session = session_create(
        organization=org,
        agent=agent,
        identity={
            "user_name": "Ada Lovelace",
            "user_id": "u-1815",
            "authority": "manager",
            "department": "Platform security",
            "permissions": ["read:rfcs", "write:reports"],
        },
        environment={
            "timezone": "Europe/London",
            "location": "London",
            "external_data": {"ticket": "SEC-2291"},
        },
        context_window_tokens=200_000,
        model="claude-sonnet-4-5",
        title="Security review of the token-binding RFC",
        actor=actor,
    )
    root = frame_push(
        session=session,
        goal="Summarize the RFC's security risks for the platform team",
        budget_total=400_000,
        inputs={"document": "rfc-draft-token-binding-07"},
        actor=actor,
    )
    frame_reserve(frame=root, purpose="brief_context", amount=2_000, actor=actor)
    frame_reserve(frame=root, purpose="breadcrumbs", amount=800, actor=actor)

    def push(parent: Frame, goal: str, budget: int) -> Frame:
        return frame_push(
            session=session, parent=parent, goal=goal, budget_total=budget, actor=actor
        )

    def add(
        frame: Frame,
        kind: str,
        priority: str,
        content: str,
        category: str = "",
        tool_call_id: str = "",
    ) -> None:
        handle_add(
            frame=frame,
            kind=kind,
            priority=priority,
            content=content,
            category=category,
            tool_call_id=tool_call_id,
            actor=actor,
        )

    add(root, "system_prompt", "critical", "You are a careful security reviewer. Cite sections.")
    add(
        root,
        "message",
        "high",
        "Please review the token-binding RFC draft and list its security risks.",
    )
    _usage(session, root, 3_200, 450, cache_write=2_400)

    read = push(root, "Read the RFC section by section", 120_000)
    for part in DATA["rfc_sections"]:
        title, text = part["title"], part["text"]
        section = push(read, f"Extract risks from “{title}”", 22_000)
        add(section, "document", "medium", f"{title}: {text} " * 6, category="rfc")
        call_id = f"toolu_{abs(hash(title)) % 10**8:08d}"
        add(
            section,
            "tool_call",
            "medium",
            f"search_cve(query={title!r})",
            tool_call_id=call_id,
            category="search_cve",
        )
        add(
            section,
            "tool_result",
            "low",
            f"2 advisories mention {title.lower()}.",
            tool_call_id=call_id,
        )
        _usage(session, section, 2_100, 380, cache_read=6_000)
        if title == "Key rotation":
            check = push(section, "Check JWKS overlap window against policy", 4_000)
            _usage(session, check, 900, 120, cache_read=1_500)
            frame_pop(
                frame=check, status="completed", result_refs=["fact:jwks_overlap_days"], actor=actor
            )
        frame_pop(
            frame=section,
            status="completed",
            result_refs=[f"notes:{title.lower().replace(' ', '-')}"],
            actor=actor,
        )
    frame_pop(frame=read, status="completed", result_refs=["notes:all-sections"], actor=actor)

    draft = push(root, "Draft the risk summary", 120_000)
    add(
        draft,
        "summary",
        "high",
        "Risks: downgrade if TLS 1.2 fallback is allowed; replay across devices; key rotation overlap too short.",
    )
    review = push(draft, "Ask the security lead to approve publishing", 12_000)
    _usage(session, review, 1_200, 200, cache_read=9_000)
    _usage(session, draft, 4_000, 900, cache_read=12_000)
    table = push(draft, "Format the summary as a table", 60_000)
    _usage(session, table, 9_000, 1_200, cache_read=41_000, cache_write=3_000)
    return session


def _one_task(
    org, agent, actor: str, *, person: str, title: str, window: int, goal: str, budget: int
) -> tuple[Session, Frame]:
    """An employee's session of one task: the session, and the frame its agent works in."""
    session = session_create(
        organization=org,
        agent=agent,
        identity={"user_name": person, "authority": "employee"},
        title=title,
        context_window_tokens=window,
        actor=actor,
    )
    return session, frame_push(session=session, goal=goal, budget_total=budget, actor=actor)


def _small_sessions(org, agent) -> None:
    actor = "agent:support-bot"
    done, frame = _one_task(
        org,
        agent,
        actor,
        person="Grace Hopper",
        title="Refund request for order 4411",
        window=100_000,
        goal="Decide whether order 4411 qualifies for a refund",
        budget=20_000,
    )
    _usage(done, frame, 5_000, 600, cache_read=3_000)
    frame_pop(frame=frame, status="completed", result_refs=["refund:approved"], actor=actor)
    lifecycle.session_end(session=done, actor=actor)

    busy, frame = _one_task(
        org,
        agent,
        actor,
        person="Alan Turing",
        title="Migrate the billing cron jobs",
        window=50_000,
        goal="Port 14 cron jobs to the scheduler",
        budget=400_000,
    )
    for _ in range(3):
        _usage(busy, frame, 6_000, 1_500, cache_read=30_000)


def _pytest_log(modules: list[str], count: int, failing: list[list[Any]]) -> str:
    """What `pytest -v --count=N` prints for ``modules`` (the coding session's tests, by
    module, as ``checkout_tests`` names them): a line per test and repeat, the ``[test,
    repeat]`` pairs in ``failing`` failed, then the tally."""
    failed_runs = {(test, n) for test, n in failing}
    lines = [
        f"tests/checkout/{module}::{test}[{n}-{count}] "
        + ("FAILED" if (test, n) in failed_runs else "PASSED")
        for n in range(1, count + 1)
        for module in modules
        for test in DATA["checkout_tests"][module]
    ]
    failed = sum(line.endswith("FAILED") for line in lines)
    tally = f"{failed} failed, {len(lines) - failed} passed" if failed else f"{len(lines)} passed"
    return "\n".join([*lines, f"===== {tally} ====="])


# What every call of the coding agent reads before the conversation: its system prompt
# and tool definitions, cached.
CHECKOUT_PREAMBLE_TOKENS = 2_400


def _checkout_messages(index: int) -> list[dict]:
    """The coding session's turn ``index`` as messages: the prompt, its tool calls and
    their results (a tool's ``output``, or the ``pytest`` run's log), the reply. Edits
    followed by passing tests are anchors: turns 4 (a fix after a failure), 7 and 10."""
    turn = DATA["checkout_turns"][index]
    tools = turn["tools"]
    messages: list[dict] = [{"role": "user", "content": turn["prompt"]}]
    if tools:
        ids = [f"toolu_checkout_{index}_{n}" for n in range(len(tools))]
        outputs = [_pytest_log(**t["pytest"]) if "pytest" in t else t["output"] for t in tools]
        failed = [t["failed"] for t in tools]
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": id_, "name": tool["tool"], "input": tool["input"]}
                    for id_, tool in zip(ids, tools, strict=True)
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": id_, "content": out, "is_error": bad}
                    for id_, out, bad in zip(ids, outputs, failed, strict=True)
                ],
            }
        )
    messages.append({"role": "assistant", "content": [{"type": "text", "text": turn["reply"]}]})
    return messages


def _compacted_session(org, agent) -> Session:
    """A coding session whose window filled: the threshold trigger queued a compaction,
    which ran here, synchronously, with the extractive summarizer (no model, no network:
    the same summary every time), so the counterfactual page has a real run to compare
    the strategies with. The job the trigger also sends finds the run done: a no-op.

    Its window is small (12,000 tokens) so that a dozen turns fill it: turn 10, with a
    long test log, passes the threshold (90 %). Each call reads the preamble and the
    history so far from the cache, and its new turn uncached; after the compaction the
    history is what the run left."""
    actor = agent_actor(agent)
    session, frame = _one_task(
        org,
        agent,
        actor,
        person="Katherine Johnson",
        title="Fix the flaky checkout tests",
        window=12_000,
        goal="Make the checkout tests pass on every CI run",
        budget=400_000,
    )
    history = 0
    for index in range(len(DATA["checkout_turns"])):
        messages = _checkout_messages(index)
        counts = contents_counted([m["content"] for m in messages], {})
        appended = messages_append(
            session=session,
            messages=messages,
            usage={
                "input_tokens": sum(sum(c or ()) for c in counts),
                "output_tokens": 150,
                "cache_read_input_tokens": CHECKOUT_PREAMBLE_TOKENS + history,
                "model": "claude-sonnet-4-5",
                "message_id": f"msg_checkout_{index:02d}",
            },
            actor=actor,
        )
        history += appended.turns[-1].tokens
        if appended.compaction is not None:
            ran = compaction_execute(
                run_id=appended.compaction.pk, summarizer=ExtractiveSummarizer()
            )
            assert ran is not None and ran.final_tokens is not None
            history = ran.final_tokens
    frame_pop(frame=frame, status="completed", result_refs=["pr:1482"], actor=actor)
    return lifecycle.session_end(session=session, actor=actor)


def _key(agent_name: str, authority: str, department: str = "") -> tuple[ApiKey, str]:
    """A new key of one of the demo organization's agents, and the key itself."""
    return api_key_create(
        issued_by="manage.py seed_demo",
        org_name=DEMO_ORG,
        agent_name=agent_name,
        authority=authority,
        department=department,
    )


@transaction.atomic
def demo_build(*, password: str) -> Demo:
    """Create the demo organization, login and sessions; leave an existing demo alone."""
    user_create(org_name=DEMO_ORG, username=DEMO_USER, password=password, approver=True, admin=True)
    key, raw = _key("research-agent", "manager", department="Platform security")
    org = key.agent.organization
    existing = Session.objects.filter(organization=org).order_by("created_at").first()
    if existing is not None:
        return Demo(org, existing, raw, created=False)
    session = _research_session(org, key.agent)
    _small_sessions(org, _key("support-bot", "employee")[0].agent)
    _compacted_session(org, _key("coding-agent", "employee")[0].agent)
    _extras(session)
    for demo in Session.objects.filter(organization=org):
        _on_the_calls_clock(demo)
    return Demo(org, session, raw, created=True)


def _on_the_calls_clock(session: Session) -> None:
    """The demo's calls are timed minutes in the past, one every 20 s (``_usage``); the
    rest of the session's story is set on the same clock. It began 10 s before its first
    call; every event up to its last timed call happened in order between the calls (a
    call's own when the call ended, which is also when its row was recorded); each frame
    opened when its push happened. What came after the last timed call keeps its time."""
    events = list(Event.objects.filter(session=session).order_by("seq"))
    timed = [e for e in events if e.type == "usage.recorded" and e.payload.get("started_at")]
    if not timed:
        return
    began = datetime.fromisoformat(timed[0].payload["started_at"]) - timedelta(seconds=10)
    moment, step = began, timedelta(milliseconds=50)
    for event in events:
        if event.seq > timed[-1].seq:
            break
        moment += step
        if event.type == "usage.recorded" and event.payload.get("started_at"):
            started = datetime.fromisoformat(event.payload["started_at"])
            moment = max(moment, started + timedelta(milliseconds=event.payload["latency_ms"]))
            Usage.objects.filter(pk=event.payload["usage_id"]).update(created_at=moment)
        if event.type == "frame.pushed" and event.frame_id is not None:
            event.payload = {**event.payload, "created_at": moment.isoformat()}
            Frame.objects.filter(pk=event.frame_id).update(created_at=moment)
        Event.objects.filter(pk=event.pk).update(created_at=moment, payload=event.payload)
    Session.objects.filter(pk=session.pk).update(started_at=began, created_at=began)


def _extras(session: Session) -> None:
    """Facts with a supersession and a dependent, an RLM state, a conversation, an approval."""
    org, author = session.organization, "agent:research-agent"
    for fact in DATA["facts"]:
        fact_write(organization=org, **{"author": author, **fact})

    # The reading frame's state, so it belongs to the session's task tree. That frame is
    # already completed, so Final below leaves the tree's open frames as they are.
    reading = Frame.objects.get(session=session, goal="Read the RFC section by section")
    state = state_initialize(
        organization=org,
        prompt="List the RFC's security risks with a severity each.",
        session=session,
        frame=reading,
        actor=author,
    )
    variable_write(state=state, name="sections_read", value=4, actor=author)
    variable_write(
        state=state,
        name="risks",
        value=[{"risk": "TLS downgrade", "severity": "high"}],
        actor=author,
    )
    checkpoint_create(
        state=state, name="after-reading", description="All four sections read", actor=author
    )
    variable_write(
        state=state,
        name="risks",
        value=[
            {"risk": "TLS downgrade", "severity": "high"},
            {"risk": "Token replay", "severity": "medium"},
            {"risk": "Short JWKS overlap", "severity": "low"},
        ],
        actor=author,
    )
    variable_write(
        state=state,
        name="Final",
        value="3 risks: TLS downgrade (high), token replay (medium), short JWKS overlap (low).",
        actor=author,
    )

    messages_append(
        session=session,
        messages=DATA["conversation"],
        usage={
            "input_tokens": 3_100,
            "output_tokens": 640,
            "cache_read_input_tokens": 18_000,
            "cache_creation_input_tokens": 2_400,
        },
        actor=author,
    )

    # The pack the agent asked for before formatting its table: a small budget, so the
    # session page shows what went in, what was dropped and at which level.
    table = Frame.objects.get(session=session, goal="Format the summary as a table")
    context_pack_assemble(
        session=session,
        frame=table,
        budget_tokens=600,
        query="key rotation token lifetime risks",
        reader_authority="manager",
    )

    review = Frame.objects.get(session=session, goal="Ask the security lead to approve publishing")
    suspension_create(
        frame=review,
        reason="Publishing a security summary needs the security lead's approval.",
        requires_approval=True,
        actor=author,
    )
