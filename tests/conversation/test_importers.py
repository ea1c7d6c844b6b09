"""import_transcript on every real transcript in tests/fixtures/transcripts (see PROVENANCE.md there)."""

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from frames.conversation.importing.executing import transcript_import
from frames.conversation.models import Turn
from frames.conversation.readers import read_transcript
from frames.models import Frame, Session, Usage

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "transcripts"
SPOTTER = FIXTURES / "claude-code" / "spotter" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
SHORT = FIXTURES / "claude-code" / "spotter" / "short.jsonl"
VIEWER = (
    FIXTURES / "claude-code" / "claude-code-viewer" / "fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
)
INIT = (
    FIXTURES / "claude-code" / "claude-code-viewer" / "1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"
)
TAU = FIXTURES / "openai" / "tau-bench_gpt-4o-airline_task13_trial2.json"
ALL_FILES = sorted(
    p
    for p in FIXTURES.rglob("*")
    if p.suffix in (".jsonl", ".json", ".yaml") and "subagents" not in p.parts
)


def run_import(path, *args):
    out = io.StringIO()
    call_command(
        "import_transcript",
        str(path),
        "--org",
        "Acme",
        "--json",
        *args,
        stdout=out,
        stderr=io.StringIO(),
    )
    return json.loads(out.getvalue())


def expected_usage(*paths):
    """Usage counted independently: one per message.id, from its last line."""
    last = {}
    for path in paths:
        for line in path.read_text().splitlines():
            event = json.loads(line)
            message = event.get("message")
            if (
                event.get("type") == "assistant"
                and isinstance(message, dict)
                and message.get("model") != "<synthetic>"
                and "usage" in message
            ):
                last[message["id"]] = message["usage"]
    fields = (
        "input_tokens",
        "output_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
    )
    return len(last), {f: sum(u.get(f) or 0 for u in last.values()) for f in fields}


def main_turns(session_id):
    return list(Turn.objects.filter(session_id=session_id, branch="").order_by("index"))


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_it_imports_every_fixture(api, path):
    report = run_import(path)
    session = Session.objects.get(pk=report["session_id"])
    assert session.organization == api.organization
    assert report["turns"] == Turn.objects.filter(session=session).count() > 0
    assert report["skipped_lines"] == 0
    assert report["api_calls"] == Usage.objects.filter(session=session).count()
    assert report["usage_totals"] == session.usage_totals
    for turn in Turn.objects.filter(session=session):
        assert turn.tokens > 0
    response = api.get(f"/sessions/{session.id}")
    assert response.json()["usage_totals"] == report["usage_totals"]


def test_short_claude_code_session(api):
    report = run_import(SHORT)
    calls, totals = expected_usage(SHORT)
    assert (report["api_calls"], calls) == (1, 1)  # one response over five lines
    assert report["usage_totals"] == totals
    assert (report["tool_calls"], report["tool_errors"], report["frames"]) == (2, 2, 1)
    first, second = main_turns(report["session_id"])
    assert first.user_message == "mix phx.server doesnt seem to start"
    assert [r["is_error"] for r in first.tool_results] == [True, True]
    assert first.thinking.startswith("The user is having trouble")
    assert second.previous_error is True


def test_a_large_session_with_a_subagent_and_a_compaction(api):
    report = run_import(SPOTTER)
    subagents = sorted((SPOTTER.with_suffix("") / "subagents").glob("agent-*.jsonl"))
    calls, totals = expected_usage(SPOTTER, *subagents)
    assert report["api_calls"] == calls and report["usage_totals"] == totals
    assert report["compactions"] == 1
    assert report["frames"] == 1 + len(subagents)
    turns = main_turns(report["session_id"])
    assert sum(len(t.tool_calls) for t in turns) == 177
    assert sum(len(t.tool_results) for t in turns) == 177  # all answered, by id
    assert sum(1 for t in turns for r in t.tool_results if r["is_error"]) == 13
    assert turns[1].user_message.startswith(
        "This session is being continued"
    )  # the compact summary
    # Work that edits files and ends with passing tests is an anchor; after errors, a resolution.
    assert turns[0].anchor_type == "task-completion"
    assert (turns[1].previous_error, turns[1].anchor_type) == (True, "error-resolution")
    root = Frame.objects.get(session_id=report["session_id"], parent=None)
    children = Frame.objects.filter(parent=root)
    assert {c.status for c in children} == {"completed"} and children.count() == len(subagents)
    assert Turn.objects.filter(
        session_id=report["session_id"], branch="agent-a7be2f0", frame__parent=root
    ).exists()
    main_calls = Usage.objects.filter(session_id=report["session_id"], frame=root).count()
    assert 0 < main_calls < report["api_calls"]


def test_an_imported_session_matches_its_event_log(api, capsys):
    """Frames, budgets and pressure as the import wrote them, its model calls recorded
    together, are what the log replays to."""
    report = run_import(SPOTTER)
    capsys.readouterr()
    call_command("rebuild_projections", "--verify", "--budgets")
    assert "match the event log" in capsys.readouterr().out
    usage = Usage.objects.filter(session_id=report["session_id"])
    assert usage.count() == report["api_calls"]


def test_inline_sidechains_become_child_frames(api):
    report = run_import(VIEWER)
    assert (report["tool_calls"], report["tool_errors"]) == (167, 23)
    assert report["frames"] == 6  # the session and its five inline subagents
    branches = set(
        Turn.objects.filter(session_id=report["session_id"]).values_list("branch", flat=True)
    )
    assert branches == {
        "",
        "sidechain-1",
        "sidechain-2",
        "sidechain-3",
        "sidechain-4",
        "sidechain-5",
    }
    calls, totals = expected_usage(VIEWER)
    assert report["api_calls"] == calls and report["usage_totals"] == totals


def test_a_small_init_session(api):
    report = run_import(INIT)
    assert (report["tool_calls"], report["tool_errors"], report["compactions"]) == (12, 1, 0)


def test_openai_chat_with_tool_errors(api):
    report = run_import(TAU, "--format", "openai")
    assert (report["tool_calls"], report["tool_errors"], report["api_calls"]) == (9, 4, 0)
    turns = main_turns(report["session_id"])
    assert turns[0].user_message.startswith("Hi! I need to change one of my upcoming flights")
    errors = [t.index for t in turns if t.has_error]
    assert errors and all(turns[i + 1].previous_error for i in errors if i + 1 < len(turns))


def test_anthropic_cassette_and_server_compaction(api):
    cassette = run_import(
        FIXTURES / "anthropic" / "openllmetry" / "test_anthropic_prompt_caching_legacy.yaml"
    )
    assert cassette["api_calls"] == 2
    assert cassette["usage_totals"]["cache_creation_input_tokens"] == 1163
    assert cassette["usage_totals"]["cache_read_input_tokens"] == 1163
    compaction = run_import(
        FIXTURES
        / "anthropic"
        / "pydantic-ai"
        / "test_anthropic_compaction_usage_with_cache.response_1_server_compaction.json"
    )
    assert compaction["compactions"] == 1


def test_a_bad_line_is_reported_and_skipped(api, tmp_path):
    lines = SHORT.read_text().splitlines()
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join(lines[:4] + ["{not json", '["a list"]'] + lines[4:]) + "\n")
    err = io.StringIO()
    out = io.StringIO()
    call_command(
        "import_transcript", str(broken), "--org", "Acme", "--json", stdout=out, stderr=err
    )
    report = json.loads(out.getvalue())
    assert report["skipped_lines"] == 2
    assert [s["line"] for s in report["skipped"]] == [5, 6]
    assert "broken.jsonl:5" in err.getvalue()
    assert report["tool_calls"] == 2 and report["api_calls"] == 1


def test_a_crash_part_way_writes_nothing(api):
    transcript = read_transcript(SPOTTER)

    def crash(done, total):
        if done >= 400:
            raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        transcript_import(organization=api.organization, transcript=transcript, progress=crash)
    assert not Session.objects.exists() and not Turn.objects.exists() and not Usage.objects.exists()


def test_it_prints_a_plain_summary_and_shows_progress(api):
    out, err = io.StringIO(), io.StringIO()
    call_command("import_transcript", str(INIT), "--org", "Acme", "-v", "2", stdout=out, stderr=err)
    assert "Imported 1af7fc5e" in out.getvalue() and "12 tool calls (1 failed)" in out.getvalue()
    assert "entries" in err.getvalue() and "#" in err.getvalue()


def test_it_refuses_unknown_organizations_and_files(api, tmp_path):
    with pytest.raises(CommandError, match="No organization"):
        call_command("import_transcript", str(INIT), "--org", "Nope", stdout=io.StringIO())
    with pytest.raises(CommandError, match="No such file"):
        call_command("import_transcript", str(tmp_path / "missing.jsonl"), "--org", "Acme")
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    with pytest.raises(CommandError, match="not JSON"):
        call_command("import_transcript", str(bad), "--org", "Acme")
    empty = tmp_path / "empty.json"
    empty.write_text('{"nothing": 1}')
    with pytest.raises(CommandError, match="no Anthropic messages"):
        call_command("import_transcript", str(empty), "--org", "Acme", "--format", "anthropic")


def test_text_no_database_can_hold_is_replaced_not_fatal(api, tmp_path):
    path = tmp_path / "odd.json"
    path.write_text(
        json.dumps(
            [
                {"role": "user", "content": "nul \u0000 and lone \ud800 here"},
                {"role": "assistant", "content": "ok"},
            ]
        )
    )
    report = run_import(path)
    turn = main_turns(report["session_id"])[0]
    assert turn.user_message == "nul \ufffd and lone \ufffd here"
