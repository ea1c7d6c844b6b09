"""The demo organization `make run` loads: a realistic research session, through the services.

Every row is written by the same services the API calls, so the demo's event log
replays to exactly its tables and the pages show what an agent's work really produces.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from contextops.actors import agent_actor
from contextops.llm import ExtractiveSummarizer
from contextops.models import Organization
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


RFC_SECTIONS = [
    (
        "Transport security",
        "TLS 1.3 is mandatory; downgrade protection via the supported_versions extension.",
    ),
    (
        "Token binding",
        "Access tokens are bound to the client's key pair; replay from another key fails.",
    ),
    ("Rate limits", "Servers must answer 429 with Retry-After; clients back off exponentially."),
    (
        "Key rotation",
        "Signing keys rotate every 90 days; the JWKS keeps the previous key for 7 days.",
    ),
]


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
    handle_add(
        frame=root,
        kind="system_prompt",
        priority="critical",
        content="You are a careful security reviewer. Cite sections.",
        actor=actor,
    )
    handle_add(
        frame=root,
        kind="message",
        priority="high",
        content="Please review the token-binding RFC draft and list its security risks.",
        actor=actor,
    )
    _usage(session, root, 3_200, 450, cache_write=2_400)

    read = frame_push(
        session=session,
        parent=root,
        goal="Read the RFC section by section",
        budget_total=120_000,
        actor=actor,
    )
    for title, text in RFC_SECTIONS:
        section = frame_push(
            session=session,
            parent=read,
            goal=f"Extract risks from “{title}”",
            budget_total=22_000,
            actor=actor,
        )
        handle_add(
            frame=section,
            kind="document",
            priority="medium",
            content=f"{title}: {text} " * 6,
            category="rfc",
            actor=actor,
        )
        call_id = f"toolu_{abs(hash(title)) % 10**8:08d}"
        handle_add(
            frame=section,
            kind="tool_call",
            priority="medium",
            content=f"search_cve(query={title!r})",
            tool_call_id=call_id,
            category="search_cve",
            actor=actor,
        )
        handle_add(
            frame=section,
            kind="tool_result",
            priority="low",
            content=f"2 advisories mention {title.lower()}.",
            tool_call_id=call_id,
            actor=actor,
        )
        _usage(session, section, 2_100, 380, cache_read=6_000)
        if title == "Key rotation":
            check = frame_push(
                session=session,
                parent=section,
                goal="Check JWKS overlap window against policy",
                budget_total=4_000,
                actor=actor,
            )
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

    draft = frame_push(
        session=session,
        parent=root,
        goal="Draft the risk summary",
        budget_total=120_000,
        actor=actor,
    )
    handle_add(
        frame=draft,
        kind="summary",
        priority="high",
        content="Risks: downgrade if TLS 1.2 fallback is allowed; replay across devices; key rotation overlap too short.",
        actor=actor,
    )
    review = frame_push(
        session=session,
        parent=draft,
        goal="Ask the security lead to approve publishing",
        budget_total=12_000,
        actor=actor,
    )
    _usage(session, review, 1_200, 200, cache_read=9_000)
    _usage(session, draft, 4_000, 900, cache_read=12_000)
    table = frame_push(
        session=session,
        parent=draft,
        goal="Format the summary as a table",
        budget_total=60_000,
        actor=actor,
    )
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


# The coding session's tests, by module, as `pytest -v` names them.
CHECKOUT_TESTS = {
    "test_coupons.py": ["test_apply_coupon", "test_coupon_expired", "test_coupon_once"],
    "test_totals.py": ["test_rounding", "test_tax_included", "test_discount_total"],
    "test_stock.py": ["test_reserved", "test_released_on_cancel", "test_out_of_stock"],
    "test_orders.py": ["test_order_placed", "test_order_paid", "test_order_refunded"],
}


def _pytest_log(modules: list[str], count: int, failing: set[tuple[str, int]]) -> str:
    """What `pytest -v --count=N` prints for ``modules``: a line per test and repeat, the
    ``(test, repeat)`` pairs in ``failing`` failed, then the tally."""
    lines = [
        f"tests/checkout/{module}::{test}[{n}-{count}] "
        + ("FAILED" if (test, n) in failing else "PASSED")
        for n in range(1, count + 1)
        for module in modules
        for test in CHECKOUT_TESTS[module]
    ]
    failed = sum(line.endswith("FAILED") for line in lines)
    tally = f"{failed} failed, {len(lines) - failed} passed" if failed else f"{len(lines)} passed"
    return "\n".join([*lines, f"===== {tally} ====="])


# The coding session's turns: (prompt, tool calls as (tool, input, output, failed), reply).
# Edits followed by passing tests are anchors: turns 4 (a fix after a failure), 7 and 10.
CHECKOUT_TURNS = [
    (
        "The checkout tests fail about one CI run in five. Find out why and fix it.",
        [
            (
                "Bash",
                {"command": "pytest tests/checkout -v --count=12"},
                _pytest_log(
                    list(CHECKOUT_TESTS),
                    12,
                    {("test_apply_coupon", 4), ("test_rounding", 9), ("test_reserved", 11)},
                ),
                True,
            )
        ],
        "Three tests fail now and then: coupons, totals rounding and stock reservation.",
    ),
    (
        "Start with the coupon test.",
        [
            (
                "Read",
                {"file_path": "tests/checkout/test_coupons.py"},
                "def test_apply_coupon(basket, clock):\n    basket.add('SKU-7', 2)\n"
                "    basket.add('SKU-3', 1)\n"
                "    assert apply_coupon(basket, 'TEN').lines[0].sku == 'SKU-7'",
                False,
            )
        ],
        "The test expects the first line to be SKU-7; the basket keeps its lines in a set.",
    ),
    (
        "Why does the order change between runs?",
        [
            (
                "Read",
                {"file_path": "checkout/coupons.py"},
                "def apply_coupon(basket, code):\n    lines = list(basket.lines)\n"
                "    if coupon_expired(code, datetime.now()):\n        return basket",
                False,
            )
        ],
        "Set order follows the hash seed, and the expiry check reads the wall clock.",
    ),
    (
        "Fix the order first.",
        [
            (
                "Edit",
                {"file_path": "checkout/coupons.py"},
                "lines = sorted(basket.lines, key=lambda line: line.position)",
                False,
            ),
            (
                "Bash",
                {"command": "pytest tests/checkout/test_coupons.py -v --count=40"},
                _pytest_log(["test_coupons.py"], 40, {("test_coupon_expired", 23)}),
                True,
            ),
        ],
        "The order holds now; one failure left: the coupon expires at midnight UTC.",
    ),
    (
        "Use the clock fixture for the expiry check.",
        [
            (
                "Edit",
                {"file_path": "checkout/coupons.py"},
                "coupon_expired(code, clock.now())",
                False,
            ),
            (
                "Bash",
                {"command": "pytest tests/checkout/test_coupons.py -v --count=40"},
                _pytest_log(["test_coupons.py"], 40, set()),
                False,
            ),
        ],
        "The coupon tests pass 40 times in a row.",
    ),
    (
        "Now the rounding test.",
        [
            (
                "Read",
                {"file_path": "checkout/totals.py"},
                "def line_total(price, quantity, discount):\n"
                "    return round(price * quantity * (1 - discount), 2)",
                False,
            )
        ],
        "Totals are floats rounded with round(), which rounds half to even.",
    ),
    (
        "Show me a case that flips.",
        [
            (
                "Bash",
                {"command": "python -c 'print(round(2.675, 2), round(0.125, 2))'"},
                "2.67 0.12",
                False,
            )
        ],
        "2.675 rounds down to 2.67; the test's random prices hit such values now and then.",
    ),
    (
        "Use Decimal with half-up rounding, as finance expects.",
        [
            (
                "Edit",
                {"file_path": "checkout/totals.py"},
                "return (price * quantity * (1 - discount)).quantize(CENT, ROUND_HALF_UP)",
                False,
            ),
            (
                "Bash",
                {"command": "pytest tests/checkout/test_totals.py -q --count=50"},
                "150 passed in 3.4s: the totals tests pass",
                False,
            ),
        ],
        "Totals are Decimals rounded half up; the totals tests pass 50 times.",
    ),
    (
        "And the stock reservation test.",
        [
            (
                "Read",
                {"file_path": "tests/checkout/test_stock.py"},
                "WAREHOUSE = Warehouse()\n\ndef test_reserved(basket):\n"
                "    WAREHOUSE.reserve('SKU-7', 2)\n"
                "    assert WAREHOUSE.available('SKU-7') == 8",
                False,
            )
        ],
        "One module-level warehouse is shared by every test in a worker.",
    ),
    (
        "Which other tests reserve stock?",
        [
            (
                "Bash",
                {"command": "grep -rn 'WAREHOUSE.reserve' tests/checkout"},
                "tests/checkout/test_stock.py:4\ntests/checkout/test_orders.py:18",
                False,
            )
        ],
        "Two modules; whichever runs first in a worker changes what the other sees.",
    ),
    (
        "Give each test its own warehouse.",
        [
            (
                "Edit",
                {"file_path": "tests/checkout/conftest.py"},
                "@pytest.fixture\ndef warehouse():\n    return Warehouse(stock={'SKU-7': 10})",
                False,
            ),
            (
                "Bash",
                {"command": "pytest tests/checkout -n 4 -v --count=10"},
                _pytest_log(list(CHECKOUT_TESTS), 10, set()),
                False,
            ),
        ],
        "Each test has its own warehouse; the whole checkout suite passes 10 times over.",
    ),
    (
        "Run the full suite twenty times to be sure.",
        [
            (
                "Bash",
                {"command": "for i in $(seq 20); do pytest -q || break; done"},
                "20 runs: 1,240 passed each, 0 failed",
                False,
            )
        ],
        "Twenty full runs, no failure.",
    ),
    (
        "Write the pull request description.",
        [],
        "Fix three flaky checkout tests: coupon lines sorted and expiry read from the clock "
        "fixture; totals in Decimal rounded half up; one warehouse per test.",
    ),
]
# What every call of the coding agent reads before the conversation: its system prompt
# and tool definitions, cached.
CHECKOUT_PREAMBLE_TOKENS = 2_400


def _checkout_messages(index: int) -> list[dict]:
    prompt, tools, reply = CHECKOUT_TURNS[index]
    messages: list[dict] = [{"role": "user", "content": prompt}]
    if tools:
        ids = [f"toolu_checkout_{index}_{n}" for n in range(len(tools))]
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": id_, "name": name, "input": tool_input}
                    for id_, (name, tool_input, _, _) in zip(ids, tools, strict=True)
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": id_, "content": out, "is_error": bad}
                    for id_, (_, _, out, bad) in zip(ids, tools, strict=True)
                ],
            }
        )
    messages.append({"role": "assistant", "content": [{"type": "text", "text": reply}]})
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
    for index in range(len(CHECKOUT_TURNS)):
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


@transaction.atomic
def demo_build(*, password: str) -> Demo:
    """Create the demo organization, login and sessions; leave an existing demo alone."""
    user_create(org_name=DEMO_ORG, username=DEMO_USER, password=password, approver=True, admin=True)
    key, raw = api_key_create(
        issued_by="manage.py seed_demo",
        org_name=DEMO_ORG,
        agent_name="research-agent",
        authority="manager",
        department="Platform security",
    )
    org = key.agent.organization
    existing = Session.objects.filter(organization=org).order_by("created_at").first()
    if existing is not None:
        return Demo(org, existing, raw, created=False)
    session = _research_session(org, key.agent)
    support_key, _ = api_key_create(
        issued_by="manage.py seed_demo",
        org_name=DEMO_ORG,
        agent_name="support-bot",
        authority="employee",
    )
    _small_sessions(org, support_key.agent)
    coding_key, _ = api_key_create(
        issued_by="manage.py seed_demo",
        org_name=DEMO_ORG,
        agent_name="coding-agent",
        authority="employee",
    )
    _compacted_session(org, coding_key.agent)
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
    fact_write(
        organization=org,
        key="key_rotation_days_v1",
        subject="key_rotation_days",
        value=90,
        source="rfc-draft-06",
        authority="manager",
        author=author,
    )
    fact_write(
        organization=org,
        key="jwks_overlap_days",
        value=7,
        source="rfc-draft-07",
        authority="manager",
        author=author,
        depends_on=["key_rotation_days_v1"],
    )
    fact_write(
        organization=org,
        key="key_rotation_days_v2",
        subject="key_rotation_days",
        value=60,
        source="rfc-draft-07",
        authority="manager",
        author=author,
        supersedes="key_rotation_days_v1",
    )
    fact_write(
        organization=org,
        key="tls_min_version",
        value="1.3",
        source="rfc-draft-07",
        authority="manager",
        author=author,
    )
    fact_write(
        organization=org,
        key="max_token_lifetime",
        subject="token_lifetime",
        value="at most 3600 s",
        source="policy",
        authority="policy",
        author="user:demo",
        constraint={"max": 3600, "unit": "s"},
    )

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
        messages=[
            {
                "role": "user",
                "content": "Review the token-binding RFC draft and list its security risks.",
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "I'll fetch the draft first."},
                    {
                        "type": "tool_use",
                        "id": "toolu_fetch",
                        "name": "fetch_document",
                        "input": {"id": "rfc-draft-token-binding-07"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_fetch",
                        "content": "404: draft -07 not found",
                        "is_error": True,
                    }
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Draft -07 moved; trying the archive."},
                    {
                        "type": "tool_use",
                        "id": "toolu_archive",
                        "name": "fetch_document",
                        "input": {"id": "archive/rfc-draft-token-binding-07"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_archive",
                        "content": "Transport security: TLS 1.3 is mandatory ...",
                    }
                ],
            },
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "Found it. Reading section by section."}],
            },
            {"role": "user", "content": "Flag anything about key rotation."},
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "text",
                        "text": "Key rotation: 60 days now (was 90); the 7-day JWKS overlap depends on it and needs review.",
                    }
                ],
            },
        ],
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
