"""A small research agent on contextops: nested frames, facts, an RLM state, a compaction
and one step that waits for a person's approval.

    CONTEXTOPS_URL=http://127.0.0.1:8000 CONTEXTOPS_API_KEY=... python examples/research_agent.py

With ``ANTHROPIC_API_KEY`` set it talks to Claude; without, it starts a local fake model
(examples/fake_model.py), so it runs offline against ``make run`` in under a minute.

Output: the first line is the session id; the last line is the session's dashboard
address. In between it says what it does, including the inbox address where the
publishing step waits for approval (``--approval-timeout`` seconds, 120 by default;
when nobody approves in time the step is skipped and the agent finishes anyway).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import anthropic

try:
    from contextops_client import Client, ContextopsError
except ImportError:  # run from a checkout without the package installed
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "clients" / "python"))
    from contextops_client import Client, ContextopsError

from contextops_client.anthropic import wrap

try:
    from fake_model import FakeModel
except ImportError:  # python -m examples.research_agent
    from examples.fake_model import FakeModel

SOURCES = {
    "rfc8446": "RFC 8446 (TLS 1.3) removes static RSA and Diffie-Hellman key exchange, "
    "so every handshake has forward secrecy; 0-RTT data can be replayed by an attacker.",
    "vendor-notes": "The load balancer vendor supports TLS 1.3 from firmware 9.2; older "
    "firmware silently falls back to TLS 1.2 and middleboxes may drop unknown extensions.",
    "incident-2025-07": "In July 2025 a partner's client pinned a TLS 1.2 cipher suite and "
    "failed for six hours after the migration; the rollback took 40 minutes.",
}


def say(*parts: object) -> None:
    print(*parts, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default=os.environ.get("CONTEXTOPS_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--api-key", default=os.environ.get("CONTEXTOPS_API_KEY", ""))
    parser.add_argument("--topic", default="the TLS 1.3 migration")
    parser.add_argument("--model", default=os.environ.get("ANTHROPIC_MODEL", "claude-haiku-4-5"))
    parser.add_argument(
        "--approval-timeout",
        type=float,
        default=120.0,
        help="seconds to wait for a person to approve publishing (then: skipped)",
    )
    parser.add_argument(
        "--compaction-timeout",
        type=float,
        default=30.0,
        help="seconds to wait for the worker to finish the compaction",
    )
    args = parser.parse_args(argv)
    if not args.api_key:
        parser.error(
            "set CONTEXTOPS_API_KEY (python manage.py create_api_key ...) or pass --api-key"
        )

    with ExitStack() as stack:
        ops = stack.enter_context(Client(args.url, args.api_key))
        if os.environ.get("ANTHROPIC_API_KEY"):
            sdk = anthropic.Anthropic()
            model_note = f"Claude ({args.model})"
        else:
            fake = stack.enter_context(FakeModel())
            sdk = anthropic.Anthropic(base_url=fake.base_url, api_key="fake-model", max_retries=0)
            model_note = f"the local fake model at {fake.base_url}"
        stack.callback(sdk.close)
        return run(ops, sdk, args, model_note)


def run(ops: Client, sdk, args, model_note: str) -> int:
    session = ops.session(
        identity={
            "user_name": os.environ.get("USER", "researcher"),
            "authority": "employee",
            "department": "security",
            "permissions": ["read:docs", "publish:wiki"],
        },
        environment={
            "timezone": "UTC",
            "location": "example",
            "external_data": {"topic": args.topic},
        },
        model=args.model,
        title=f"Research: {args.topic}",
    )
    say(session.id)
    say(f"Session {session.id} started; model: {model_note}")
    tag = session.id[:8]

    # Checklist: on start, ask for a previous state and handle pending work.
    state = ops.session_resume(session)
    for work in state["pending_work"]:
        say(f"  pending from before: {work['work_type']}: {work['description']}")

    claude = wrap(sdk, ops, session)
    history: list[dict] = []

    def ask(text: str, *, stream: bool = False, max_tokens: int = 300) -> str:
        history.append({"role": "user", "content": text})
        kwargs = dict(model=args.model, max_tokens=max_tokens, messages=history)
        if stream:
            with claude.messages.stream(**kwargs) as events:
                answer = "".join(events.text_stream)
                reply = events.get_final_message()
        else:
            reply = claude.messages.create(**kwargs)
            answer = "".join(b.text for b in reply.content if b.type == "text")
        history.append({"role": "assistant", "content": reply.content})
        return answer

    with ops.frame(session, goal=f"Research {args.topic}", budget=60_000) as root:
        root.reserve("brief_context", 500)
        root.reserve("breadcrumbs", 200)

        # Facts: a deadline, then a later one that supersedes it explicitly.
        first = ops.fact_write(
            f"migration_deadline_{tag}",
            "2026-03-01",
            source="policy",
            subject=f"migration_deadline_{tag}",
        )
        second = ops.fact_write(
            f"migration_deadline_{tag}_v2",
            "2026-04-15",
            source="policy",
            subject=f"migration_deadline_{tag}",
            supersedes=first["key"],
        )
        say(
            f"Fact {first['key']} superseded by {second['key']} ({second['outcome']}, rule {second['rule'] or 'explicit'})"
        )
        ops.working_set_put(session, "current_topic", args.topic, ttl_seconds=3600)

        with ops.frame(session, goal="Gather sources", budget=20_000) as gather:
            pack = gather.context_pack(budget_tokens=4_000, query=args.topic)
            say(
                f"Context pack: {pack['token_summary']['used']}/{pack['token_summary']['budget']} tokens, {len(pack['facts'])} facts"
            )
            for name, text in SOURCES.items():
                handle = gather.handle(
                    "tool_result", content=text, priority="medium", category="source", ref=None
                )
                summary = ask(f"Summarize source {name} for the report on {args.topic}: {text}")
                say(
                    f"  read {name} (handle {handle['id'][:8]}, {handle['estimated_tokens']} tokens): {summary[:60]}"
                )

        with ops.frame(session, goal="Analyse the risks", budget=20_000) as analyse:
            rlm = ops.rlm_state_create(
                f"List the risks of {args.topic}", session=session, frame=analyse
            )
            state_id = rlm["state_id"]
            ops.rlm_variable_put(state_id, "sources", list(SOURCES), type="array")
            risks = ask("List the three biggest risks, one line each.")
            ops.rlm_variable_put(state_id, "risks", risks, type="text")
            ops.rlm_checkpoint_create(state_id, "risks listed")
            confidence = ask("How confident are you, from 0 to 1? Say why briefly.", stream=True)
            ops.rlm_variable_put(
                state_id, "confidence", 0.8, type="number", description=confidence[:200]
            )
            ops.rlm_final(state_id, f"Risks of {args.topic}: {risks}")
            say(f"RLM state {state_id} complete; its Final closed frame {analyse.id[:8]}")

        # Compaction: the one the window threshold queued, else ask for one.
        queued = list(claude.contextops.history.pending_compactions)
        run_id = (
            queued[0]
            if queued
            else ops.compaction_create(session, strategy="summarize_oldest", keep_turns=2)["id"]
        )
        compaction = ops.compaction_wait(run_id, timeout=args.compaction_timeout)
        say(
            f"Compaction {run_id[:8]}: {compaction['status']}, {compaction.get('items_summarized', 0)} turns summarized"
        )
        summary = ask("Write a three-sentence executive summary of the findings.")
        root.handle("summary", content=summary, priority="high", category="report")
        say(f"Executive summary: {summary[:80]}")

    with ops.frame(session, goal="Publish the report to the wiki", budget=5_000) as publish:
        suspension = publish.suspend(
            "Publish the TLS report to the team wiki?",
            requires_approval=True,
            expires_in_seconds=max(1, int(args.approval_timeout) + 30),
        )
        say(f"Waiting up to {args.approval_timeout:g}s for approval at {suspension.approve_url}")
        started = time.monotonic()
        status = suspension.wait(timeout=args.approval_timeout)
        if status == "approved":
            suspension.resume()
            ops.fact_write(
                f"tls_report_{tag}_status",
                "published",
                source="observation",
                subject=f"tls_report_{tag}",
            )
            publish.handle(
                "tool_result",
                content="Report published to the wiki.",
                priority="low",
                category="publish",
            )
            say(f"Approved after {time.monotonic() - started:.0f}s; report published")
        else:
            say(f"Not approved in time ({status}): publishing skipped")

    say(session.dashboard_url)
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except ContextopsError as exc:
        print(f"contextops error: {exc}", file=sys.stderr)
        raise SystemExit(1) from exc
