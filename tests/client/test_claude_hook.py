"""``contextops claude-hook`` as Claude Code runs it: a process per hook event, the hook's
JSON on stdin, the transcript growing between calls; against the live server and a real
worker, and with no server at all."""

import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from contextops_client import Client
from contextops_client.hook import Source, claude_code_sources
from django.core.management import call_command

from contextops.tenancy import organization_get_or_create
from frames.conversation.models import Turn
from frames.models import Frame, Session, Usage
from tests.waiting import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.xdist_group("live")]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts"
SPOTTER = FIXTURES / "claude-code" / "spotter" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
SHORT = FIXTURES / "claude-code" / "spotter" / "short.jsonl"
SESSION_ID = SPOTTER.stem
# Claude Code names a session's file by its id: short.jsonl's session, as Claude Code named it.
SHORT_ID = "55604662-cf2a-4331-851a-ec234028f8ca"
SHORT_NAME = f"{SHORT_ID}.jsonl"
TURN_FIELDS = (
    "branch",
    "index",
    "user_message",
    "tool_calls",
    "tool_results",
    "assistant_response",
    "thinking",
    "tokens",
    "previous_error",
    "has_error",
    "anchor_type",
    "summarized",
)
CALL_FIELDS = (
    "model",
    "message_id",
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)


def script() -> str:
    found = shutil.which("contextops", path=str(Path(sys.executable).parent))
    assert found, "the contextops script is not installed: pip install -e clients/python"
    return found


class Hook:
    """Calls ``contextops claude-hook`` the way Claude Code does: one process per event,
    its JSON on stdin, the state and log in a home of the test's own."""

    def __init__(self, home: Path, url: str, key: str) -> None:
        self.home = home
        self.state = home / "state"
        self.log = home / "hook.log"
        self.env = {
            **os.environ,
            "HOME": str(home),
            "CONTEXTOPS_URL": url,
            "CONTEXTOPS_API_KEY": key,
            "CONTEXTOPS_HOOK_STATE": str(self.state),
            "CONTEXTOPS_HOOK_LOG": str(self.log),
        }
        self.seconds: list[float] = []

    def __call__(self, event: str, transcript: Path, **extra) -> subprocess.CompletedProcess:
        payload = {
            "session_id": extra.pop("session_id", transcript.stem),
            "transcript_path": str(transcript),
            "cwd": str(self.home),
            "permission_mode": "default",
            "hook_event_name": event,
            **extra,
        }
        started = time.monotonic()
        done = subprocess.run(
            [script(), "claude-hook"],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            env=self.env,
            timeout=60,
        )
        self.seconds.append(time.monotonic() - started)
        assert done.returncode == 0, done.stderr
        assert done.stdout == ""  # SessionStart's output would go into Claude's context
        return done

    def lines(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def jobs(self) -> list[str]:
        return re.findall(r"\b(imp-[\w-]+)", self.log.read_text()) if self.log.exists() else []

    def offsets(self, session_id: str = SESSION_ID) -> dict:
        path = self.state / f"{session_id}.json"
        return json.loads(path.read_text())["offsets"] if path.exists() else {}


@pytest.fixture
def hook(agent, tmp_path):
    return Hook(tmp_path / "home", agent.url, agent.key)


def wait_for(ops: Client, jobs: list[str], timeout: float = 240.0) -> list[dict]:
    """Every import job, finished (completed or failed)."""
    deadline = time.monotonic() + timeout
    return [ops.import_wait(job, timeout=max(1.0, deadline - time.monotonic())) for job in jobs]


def one_shot(path: Path) -> dict:
    """The whole file imported at once, as ``manage.py import_transcript`` does, in an
    organization of its own; its summary."""
    organization_get_or_create(name="Globex")
    out = io.StringIO()
    call_command(
        "import_transcript",
        str(path),
        "--org",
        "Globex",
        "--json",
        stdout=out,
        stderr=io.StringIO(),
    )
    return json.loads(out.getvalue())


def growth(main: Path, subagents: list[Path]) -> list[tuple[str, bytes]]:
    """Every line of the session's files in the order Claude Code wrote them, as (file
    name, line): each file in its own order, the files interleaved by their timestamps (a
    line is placed by the latest timestamp of its file so far)."""
    lines = []
    for order, path in enumerate([main, *subagents]):
        stamp = ""
        with path.open("rb") as handle:
            for number, raw in enumerate(handle):
                stamp = max(stamp, json.loads(raw).get("timestamp") or "")
                lines.append((stamp, order, number, path.name, raw))
    return [(name, raw) for *_, name, raw in sorted(lines)]


def session_snapshot(session: Session) -> dict:
    """What a session holds, without ids and times: turns, model calls, frames, totals."""
    turns = Turn.objects.filter(session=session).order_by("branch", "index")
    calls = Usage.objects.filter(session=session).order_by("message_id", "model", "input_tokens")
    frames = Frame.objects.filter(session=session).order_by("depth", "goal")
    return {
        "turns": [tuple(t[f] for f in TURN_FIELDS) for t in turns.values(*TURN_FIELDS)],
        "calls": [tuple(c[f] for f in CALL_FIELDS) for c in calls.values(*CALL_FIELDS)],
        "frames": [(f.depth, f.goal, f.status, f.budget_used) for f in frames],
        "usage_totals": session.usage_totals,
        "tool_errors": sum(1 for t in turns for result in t.tool_results if result.get("is_error")),
    }


# -- what is sent: whole lines only --------------------------------------------------------


def test_a_source_holds_whole_lines_only(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"a": 1}\n{"b": "\xc3\xa9"}\n{"c": ')
    source = Source(path, path.name)
    assert source.end == len(b'{"a": 1}\n{"b": "\xc3\xa9"}\n')
    assert source.take(10**6) == b'{"a": 1}\n{"b": "\xc3\xa9"}\n'
    assert source.take(1) == b'{"a": 1}\n'  # at least one line, however small the room
    source.offset = source.end
    assert source.take(10**6) == b""
    assert Source(path, path.name, offset=10**6).offset == 0  # a file cut short starts over


def test_a_claude_code_transcript_goes_with_its_subagent_files(tmp_path):
    main = tmp_path / SPOTTER.name
    shutil.copy(SPOTTER, main)
    shutil.copytree(SPOTTER.with_suffix(""), tmp_path / SPOTTER.stem)
    sources = claude_code_sources(main, {"agent-a7be2f0.jsonl": 10})
    assert [s.file_name for s in sources] == [
        SPOTTER.name,
        "agent-a7be2f0.jsonl",
        "agent-acompact-f46190.jsonl",
    ]
    assert [s.offset for s in sources] == [0, 10, 0]


# -- the server is away ----------------------------------------------------------------------


def test_it_exits_0_quickly_and_logs_when_the_server_is_down(tmp_path):
    home = tmp_path / "home"
    hook = Hook(home, "http://127.0.0.1:9", "cops_abc_def")
    transcript = tmp_path / SHORT_NAME
    shutil.copy(SHORT, transcript)
    for event in ("SessionStart", "Stop", "SessionEnd"):
        hook(event, transcript)
    assert max(hook.seconds) < 8
    errors = [line for line in hook.lines() if "error" in line]
    assert len(errors) == 3 and all("ConnectionFailed" in line for line in errors), hook.lines()
    assert hook.offsets(SHORT_ID) == {}  # nothing counts as sent


def test_it_exits_0_and_logs_whatever_it_is_given(tmp_path):
    hook = Hook(tmp_path, "http://127.0.0.1:9", "cops_abc_def")
    for stdin in ("", "not json", "[1, 2]", json.dumps({"hook_event_name": "Stop"})):
        done = subprocess.run(
            [script(), "claude-hook"], input=stdin, capture_output=True, text=True, env=hook.env
        )
        assert (done.returncode, done.stdout) == (0, "")
    assert len([line for line in hook.lines() if "error" in line]) == 4
    without_key = {**hook.env, "CONTEXTOPS_API_KEY": ""}
    done = subprocess.run(
        [script(), "claude-hook"],
        input=json.dumps({"session_id": "s", "transcript_path": str(SHORT)}),
        capture_output=True,
        text=True,
        env=without_key,
    )
    assert done.returncode == 0 and "CONTEXTOPS_API_KEY is not set" in hook.lines()[-1]


def test_it_exits_0_when_its_log_cannot_be_written(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("a file where the log's folder would be")
    hook = Hook(tmp_path, "http://127.0.0.1:9", "cops_abc_def")
    hook.env["CONTEXTOPS_HOOK_LOG"] = str(blocked / "hook.log")
    hook.env["CONTEXTOPS_HOOK_STATE"] = str(blocked / "state")
    hook("Stop", SHORT)


# -- against the live server ---------------------------------------------------------------


def test_replaying_a_session_through_the_hook_equals_importing_it_whole(
    agent, ops, hook, celery_worker, tmp_path
):
    project = tmp_path / "projects" / "-home-user-spotter"
    (project / SESSION_ID / "subagents").mkdir(parents=True)
    main = project / SPOTTER.name
    subagents = sorted((SPOTTER.with_suffix("") / "subagents").glob("agent-*.jsonl"))
    written = {SPOTTER.name: main}
    written.update({s.name: project / SESSION_ID / "subagents" / s.name for s in subagents})
    lines = growth(SPOTTER, subagents)

    hook("SessionStart", main, source="startup")  # before the transcript exists
    step = 97
    for start in range(0, len(lines), step):
        chunk = lines[start : start + step]
        for name, raw in chunk:
            with written[name].open("ab") as handle:
                handle.write(raw)
        following = lines[start + step] if start + step < len(lines) else None
        if following is not None and start % 2:  # a line still being written
            name, raw = following
            with written[name].open("ab") as handle:
                handle.write(raw[: len(raw) // 2])
            lines[start + step] = (name, raw[len(raw) // 2 :])
        last = chunk[-1][0]
        if last != SPOTTER.name:
            hook(
                "SubagentStop",
                main,
                agent_id=last.removeprefix("agent-").removesuffix(".jsonl"),
                agent_transcript_path=str(written[last]),
                stop_hook_active=False,
            )
        elif start // step == 6:
            hook("PreCompact", main, trigger="auto", custom_instructions="")
        else:
            hook("Stop", main, stop_hook_active=False)
        sent = hook.offsets()
        for name, path in written.items():  # whole lines only: a half line waits
            if path.exists():
                assert path.read_bytes()[: sent.get(name, 0)].endswith(b"\n") or not sent.get(name)
    hook("SessionEnd", main, reason="exit")

    assert hook.offsets() == {name: path.stat().st_size for name, path in written.items()}
    assert all(
        path.read_bytes() == (SPOTTER.parent / rel).read_bytes()
        for rel, path in [
            (SPOTTER.name, main),
            *[(f"{SESSION_ID}/subagents/{s.name}", written[s.name]) for s in subagents],
        ]
    )
    jobs = hook.jobs()
    assert len(jobs) >= len(lines) // step, hook.lines()
    finished = wait_for(ops, jobs)
    assert [job["status"] for job in finished] == ["completed"] * len(jobs), finished
    assert max(hook.seconds) < 10
    assert not any("error" in line for line in hook.lines()), hook.lines()

    live = Session.objects.get(organization=agent.organization)
    once = Session.objects.get(pk=one_shot(SPOTTER)["session_id"])
    replayed, expected = session_snapshot(live), session_snapshot(once)
    assert replayed["usage_totals"] == expected["usage_totals"]
    assert replayed["calls"] == expected["calls"]
    assert (
        replayed["tool_errors"]
        == expected["tool_errors"]
        == 13
        + sum(
            1
            for t in Turn.objects.filter(session=once).exclude(branch="")
            for r in t.tool_results
            if r.get("is_error")
        )
    )
    assert replayed["frames"] == expected["frames"]
    assert replayed["turns"] == expected["turns"]
    assert live.ended_at is not None and once.ended_at is not None


def test_a_half_written_line_waits_for_the_next_call(agent, ops, hook, celery_worker, tmp_path):
    transcript = tmp_path / SHORT_NAME
    lines = SHORT.read_bytes().splitlines(keepends=True)
    transcript.write_bytes(b"".join(lines[:3]) + lines[3][:20])
    hook("Stop", transcript)
    assert hook.offsets(SHORT_ID) == {SHORT_NAME: len(b"".join(lines[:3]))}
    transcript.write_bytes(b"".join(lines))
    hook("Stop", transcript)
    hook("Stop", transcript)  # nothing new: nothing sent
    assert hook.offsets(SHORT_ID) == {SHORT_NAME: len(SHORT.read_bytes())}
    hook("SessionEnd", transcript, reason="logout")
    jobs = hook.jobs()
    assert len(jobs) == 3, hook.lines()  # two Stops with news, and the end
    assert all(job["status"] == "completed" for job in wait_for(ops, jobs))
    session = Session.objects.get(organization=agent.organization)
    assert Turn.objects.filter(session=session).count() == 2
    assert session.ended_at is not None


def test_it_sends_again_from_where_the_server_says_when_its_state_is_off(
    agent, ops, hook, celery_worker, tmp_path
):
    transcript = tmp_path / SHORT_NAME
    lines = SHORT.read_bytes().splitlines(keepends=True)
    transcript.write_bytes(b"".join(lines[:2]))
    hook("Stop", transcript)
    held = len(b"".join(lines[:2]))
    # The state claims more than the server holds (a state file from another machine, say).
    state = hook.state / f"{SHORT_ID}.json"
    data = json.loads(state.read_text())
    data["offsets"][SHORT_NAME] = held + len(lines[2])
    state.write_text(json.dumps(data))
    transcript.write_bytes(b"".join(lines))
    hook("Stop", transcript)
    # And a lost state file: everything is sent again from the start, and matches.
    state.unlink()
    hook("SessionEnd", transcript, reason="exit")
    assert not any("error" in line for line in hook.lines()), hook.lines()
    assert all(job["status"] == "completed" for job in wait_for(ops, hook.jobs()))
    session = Session.objects.get(organization=agent.organization)
    once = Session.objects.get(pk=one_shot(SHORT)["session_id"])
    assert session_snapshot(session) == session_snapshot(once)


def test_what_session_end_cannot_send_in_time_goes_on_in_the_background(
    agent, ops, hook, celery_worker, tmp_path
):
    transcript = tmp_path / SHORT_NAME
    shutil.copy(SHORT, transcript)
    hook.env["CONTEXTOPS_HOOK_TIMEOUT"] = "0"  # no time at all: everything is left over
    hook("SessionEnd", transcript, reason="prompt_input_exit")
    assert hook.seconds[-1] < 5
    # A detached process sends it, after the hook has returned.
    wait_until(hook.jobs, timeout=60, what=hook.lines)
    assert [job["status"] for job in wait_for(ops, hook.jobs())] == ["completed"]
    assert any("sent in the background" in line for line in hook.lines())
    assert hook.lines()[-1].endswith("[background]") and "(final)" in hook.lines()[-1]
    assert hook.offsets(SHORT_ID) == {SHORT_NAME: SHORT.stat().st_size}
    session = Session.objects.get(organization=agent.organization)
    assert session.ended_at is not None
    assert Turn.objects.filter(session=session).count() == 2
