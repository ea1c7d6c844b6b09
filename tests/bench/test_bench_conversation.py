"""Conversation at scale: message ingest through the API, and compaction turn selection.

Ingest: 1,000 turns, each one request of four messages (user text, assistant tool_use,
tool_result, assistant text) with usage, through the full API stack; then the batch form,
the same 1,000 turns sent 100 messages (25 turns) per request. Selection: the
anchor-point selection over 1,000 and 10,000 stored turns, from reading the in-window
turns to the keep/summarize split (the summarizer excluded). Import: a large Claude Code
file beside tiktoken alone on the same bytes. Writes docs/benchmarks-conversation-<database>.md
and records ``ingest_messages_per_s`` (the batch row) and ``import_vs_tiktoken``.
"""

import statistics
import time
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from frames.conversation.compaction import _select
from frames.conversation.models import CompactionRun, Turn
from frames.services.sessions import session_create
from frames.services.stack import frame_push
from tests.bench.report import database_vendor, record, write_section

TURNS = 1_000
BATCH = 100  # messages per request in the batch row: 25 turns of four
SPOTTER = (
    Path(__file__).resolve().parent.parent
    / "fixtures"
    / "transcripts"
    / "claude-code"
    / "spotter"
    / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
)
COPIES = 4


def _import_throughput(organization, tmp_path) -> dict:
    """A large Claude Code file (the spotter session repeated, ids made unique per copy)."""
    from contextops.tokens import count_tokens
    from frames.conversation.importing.executing import transcript_import
    from frames.conversation.readers import read_transcript

    original = SPOTTER.read_text()
    text = "".join(
        original.replace('"id":"msg_', f'"id":"msg_c{k}_').replace("toolu_", f"toolu_c{k}_")
        for k in range(COPIES)
    )
    big = tmp_path / "large.jsonl"
    big.write_text(text)
    megabytes = big.stat().st_size / 1e6
    started = time.perf_counter()
    transcript = read_transcript(big)
    parsed = time.perf_counter()
    report = transcript_import(organization=organization, transcript=transcript)
    done = time.perf_counter()
    started_tiktoken = time.perf_counter()
    tokens = count_tokens(text)
    tiktoken_s = time.perf_counter() - started_tiktoken
    return {
        "mb": megabytes,
        "turns": report.turns,
        "messages": sum(1 for e in transcript.entries if e.kind == "message"),
        "api_calls": report.api_calls,
        "parse_s": parsed - started,
        "total_s": done - started,
        "tiktoken_s": tiktoken_s,
        "tokens": tokens,
    }


def _turn_messages(i: int) -> list[dict]:
    anchor = i % 25 == 0
    name = "Edit" if anchor else "Read"
    return [
        {"role": "user", "content": f"Step {i}: look at module {i} and fix what is wrong with it."},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me check."},
                {
                    "type": "tool_use",
                    "id": f"toolu_{i}",
                    "name": name,
                    "input": {"file_path": f"src/module_{i}.py"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": f"toolu_{i}",
                    "content": "12 tests pass" if anchor else "def f():\n    return 1\n" * 5,
                    "is_error": i % 40 == 1,
                }
            ],
        },
        {
            "role": "assistant",
            "content": [{"type": "text", "text": f"Module {i} is fine now. " * 4}],
        },
    ]


def _selection_time(session, rounds: int = 20) -> tuple[float, float, int]:
    run = CompactionRun(session=session, strategy="anchor_point")
    times, queries = [], 0
    for _ in range(rounds):
        with CaptureQueriesContext(connection) as ctx:
            started = time.perf_counter()
            turns = list(
                Turn.objects.filter(session=session, branch="", summarized=False, truncated=False)
                .only("id", "index", "tokens", "anchor_type")
                .order_by("index")
            )
            chosen = _select(run, turns)
            elapsed = (time.perf_counter() - started) * 1000
        assert chosen.summarize and chosen.preserved_anchor is not None
        times.append(elapsed)
        queries = len(ctx.captured_queries)
    times.sort()
    return statistics.median(times), times[int(0.95 * (len(times) - 1))], queries


def _ingest(api, messages_per_request: int) -> dict:
    """``TURNS`` turns through ``POST /sessions/{id}/messages`` in requests of
    ``messages_per_request`` messages (whole turns), each with the usage of one model call."""
    session = session_create(
        organization=api.organization,
        identity={"user_name": "Bench"},
        context_window_tokens=10_000_000,
    )
    frame_push(session=session, goal="bench", budget_total=10**12)
    path = f"/sessions/{session.id}/messages"
    usage = {"input_tokens": 50, "output_tokens": 40, "cache_read_input_tokens": 2_000}
    turns_per_request = messages_per_request // 4
    per_request = []
    started = time.perf_counter()
    for first in range(0, TURNS, turns_per_request):
        messages = [m for i in range(first, first + turns_per_request) for m in _turn_messages(i)]
        t0 = time.perf_counter()
        response = api.post(path, {"messages": messages, "usage": usage})
        per_request.append((time.perf_counter() - t0) * 1000)
        assert response.status_code == 200, response.content[:300]
    total = time.perf_counter() - started
    assert Turn.objects.filter(session=session).count() == TURNS
    p50, p95 = (
        statistics.median(per_request),
        sorted(per_request)[int(0.95 * (len(per_request) - 1))],
    )
    figures = {
        "per_request": messages_per_request,
        "requests": len(per_request),
        "messages_per_s": TURNS * 4 / total,
        "turns_per_s": TURNS / total,
        "p50": p50,
        "p95": p95,
        "session": session,
    }
    print(
        f"\ningest, {messages_per_request} messages a request: {figures['messages_per_s']:.0f} messages/s, "
        f"{figures['turns_per_s']:.0f} turns/s, request p50 {p50:.1f} ms p95 {p95:.1f} ms"
    )
    return figures


@pytest.mark.django_db
def test_bench_conversation(api, settings, tmp_path):
    settings.CONTEXTOPS_SUMMARIZER = "extractive"
    per_turn = _ingest(api, 4)
    batch = _ingest(api, BATCH)
    session = per_turn["session"]

    rows = [(TURNS, *_selection_time(session))]
    big = session_create(organization=api.organization, identity={"user_name": "Bench 10k"})
    Turn.objects.bulk_create(
        [
            Turn(
                session=big,
                index=i,
                tokens=100 + i % 50,
                anchor_type="task-completion" if i % 25 == 0 else "",
            )
            for i in range(10_000)
        ],
        batch_size=2_000,
    )
    rows.append((10_000, *_selection_time(big)))
    for n, p50, p95, q in rows:
        print(f"selection over {n:,} turns: p50 {p50:.2f} ms p95 {p95:.2f} ms, {q} queries")

    imp = _import_throughput(api.organization, tmp_path)
    print(
        f"import: {imp['mb']:.1f} MB in {imp['total_s']:.1f} s = {imp['mb'] / imp['total_s']:.2f} MB/s, "
        f"{imp['messages'] / imp['total_s']:.0f} messages/s, {imp['turns'] / imp['total_s']:.1f} turns/s; tiktoken alone {imp['mb'] / imp['tiktoken_s']:.2f} MB/s"
    )
    database = database_vendor()
    import_mb_s = imp["mb"] / imp["total_s"]
    tiktoken_mb_s = imp["mb"] / imp["tiktoken_s"]
    lines = [
        f"# Conversation ingest, compaction selection and transcript import ({database})",
        "",
        "`make bench` (tests/bench/test_bench_conversation.py), through the Django test client.",
        "Timings are wall-clock on whatever machine ran them (a shared one when this file was written: expect",
        "twofold swings between runs); no test asserts on them.",
        "",
        "## Message ingest",
        "",
        f"{TURNS:,} turns of four messages (user text, assistant text + tool_use, tool_result, assistant",
        "text) to `POST /sessions/{id}/messages`, with the usage of one model call a request: grouping,",
        "token counting of every block, anchor detection, the usage record (session totals, frame budget,",
        "pressure) and the event, in one transaction per request. First one turn a request, as an agent",
        f"sends them turn by turn; then the batch form, {BATCH} messages ({BATCH // 4} turns) a request, as",
        "a client catching up sends them. `ingest_messages_per_s` in the JSON is the batch row.",
        "",
        "| messages a request | requests | messages/s | turns/s | request p50 ms | request p95 ms |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
        *[
            f"| {r['per_request']} | {r['requests']:,} | {r['messages_per_s']:.0f} | {r['turns_per_s']:.0f} | {r['p50']:.1f} | {r['p95']:.1f} |"
            for r in (per_turn, batch)
        ],
        "",
        "## Compaction selection (summarizer excluded)",
        "",
        "Reading the in-window turns of the session and splitting them with seed 002's anchor-point rule",
        "(an anchor every 25 turns), 20 rounds.",
        "",
        "| turns | p50 ms | p95 ms | queries |",
        "| ---: | ---: | ---: | ---: |",
    ]
    lines += [f"| {n:,} | {p50:.2f} | {p95:.2f} | {q} |" for n, p50, p95, q in rows]
    lines += [
        "",
        "## Transcript import",
        "",
        f"`import_transcript` on a Claude Code file made by repeating the spotter fixture {COPIES} times (message and",
        "tool ids made unique per copy): parsing, then one transaction writing the session, frames, turns, messages",
        "(every block counted with tiktoken) and usage. Beside it, tiktoken encoding the same bytes in one",
        "call, in the same run; *× tiktoken* is import MB/s over tiktoken-alone MB/s (`import_vs_tiktoken`).",
        "",
        "| file MB | messages | turns | model calls | parse s | total s | MB/s | messages/s | turns/s | tiktoken alone MB/s | × tiktoken |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        f"| {imp['mb']:.1f} | {imp['messages']:,} | {imp['turns']:,} | {imp['api_calls']:,} | {imp['parse_s']:.2f} | "
        f"{imp['total_s']:.2f} | {import_mb_s:.2f} | {imp['messages'] / imp['total_s']:.0f} | "
        f"{imp['turns'] / imp['total_s']:.1f} | {tiktoken_mb_s:.2f} | {import_mb_s / tiktoken_mb_s:.2f} |",
        "",
        "Most of a Claude Code file is JSON framing, repeated usage and tool inputs; what is counted is the",
        "content of the blocks, so the import's MB/s is not bounded by tiktoken's. This session has few user",
        "prompts (a turn per prompt, each with dozens of tool calls), hence few turns per second; messages/s is",
        "the comparable rate.",
    ]
    write_section(f"conversation-{database}", "\n".join(lines))
    record(
        {
            "ingest_messages_per_s": round(batch["messages_per_s"], 1),
            "import_vs_tiktoken": round(import_mb_s / tiktoken_mb_s, 3),
        }
    )
