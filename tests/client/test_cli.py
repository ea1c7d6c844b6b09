"""The ``contextops`` command line against the live server: click's runner in this process,
and the installed ``contextops`` script where a real process matters (tail, Ctrl-C)."""

import asyncio
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from contextops_client import AsyncClient, Client, ImportJob, ImportQueued, SessionData
from contextops_client.cli import main
from contextops_client.hook import claude_code_sources, upload
from django.core.management import call_command

from contextops.tenancy import api_key_create, organization_get_or_create, user_create
from frames.conversation.models import Turn
from frames.models import Frame, Session, Suspension
from tests.client.test_types import shape_errors

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.xdist_group("live")]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts"
SPOTTER = FIXTURES / "claude-code" / "spotter" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
SHORT = FIXTURES / "claude-code" / "spotter" / "short.jsonl"
TRANSCRIPTS = sorted(
    p
    for p in FIXTURES.rglob("*")
    if p.suffix in (".jsonl", ".json", ".yaml") and "subagents" not in p.parts
)
FIGURES = (
    "frames",
    "turns",
    "api_calls",
    "tool_calls",
    "tool_errors",
    "compactions",
    "usage_totals",
    "skipped_lines",
    "skipped",
)
# The score's parts, as the pack table heads its columns (docs/retrieval.md §2).
PARTS = ["PRIORITY", "LEXICAL", "SEMANTIC", "RECENCY", "ATTENTION", "NEIGHBOUR", "OLDER"]


def script() -> str:
    """The installed ``contextops`` console script, beside this interpreter."""
    found = shutil.which("contextops", path=str(Path(sys.executable).parent))
    assert found, "the contextops script is not installed: pip install -e clients/python"
    return found


def cli(agent, *args: str, key: str | None = None, input: str | None = None):
    """``contextops ARGS`` in this process, configured from the environment as a user would."""
    env = {"CONTEXTOPS_URL": agent.url, "CONTEXTOPS_API_KEY": key or agent.key}
    return CliRunner().invoke(main, list(args), env=env, input=input, catch_exceptions=False)


def personal_key(org: str = "Acme", username: str = "grace", approver: bool = True) -> str:
    user_create(org_name=org, username=username, password="pw-for-tests-1", approver=approver)
    return api_key_create(org_name=org, agent_name=f"{username}-cli", username=username)[1]


def import_transcript_json(path: Path, org: str) -> dict:
    """What ``manage.py import_transcript --json`` prints for ``path`` in ``org``."""
    organization_get_or_create(name=org)
    out = io.StringIO()
    call_command(
        "import_transcript", str(path), "--org", org, "--json", stdout=out, stderr=io.StringIO()
    )
    return json.loads(out.getvalue())


# -- errors, configuration ---------------------------------------------------------------


def test_it_prints_the_servers_error_and_exits_non_zero(agent):
    result = CliRunner().invoke(
        main, ["--url", agent.url, "--api-key", "cops_not_valid", "sessions"]
    )
    assert result.exit_code == 1
    assert "401 unauthenticated" in result.output
    missing = cli(agent, "tail", "00000000-0000-0000-0000-000000000000", "--once")
    assert missing.exit_code == 1
    assert "404 not_found" in missing.output


def test_flags_win_over_the_environment(agent):
    result = CliRunner().invoke(
        main,
        ["--url", agent.url, "--api-key", agent.key, "sessions", "--json"],
        env={"CONTEXTOPS_URL": "http://127.0.0.1:9", "CONTEXTOPS_API_KEY": "cops_x_y"},
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["count"] == 0


# -- sessions, tail ----------------------------------------------------------------------


def test_it_lists_the_sessions_as_a_table_and_as_json(agent, ops):
    first = ops.session(title="Refund policy review")
    second = ops.session(title="Quarterly report " + "x" * 80)
    result = cli(agent, "sessions")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["ID", "STARTED", "STATE", "CALLS", "AGENT", "TITLE"]
    assert lines[1].startswith(second.id) and lines[2].startswith(first.id)  # newest first
    assert "Refund policy review" in lines[2]
    assert lines[1].endswith("…") and "x" * 80 not in lines[1]
    assert "2 of 2 sessions" in result.stderr
    page = json.loads(cli(agent, "sessions", "--json", "--limit", "1").stdout)
    assert page["count"] == 2 and [s["id"] for s in page["items"]] == [second.id]
    assert page["next_offset"] == 1
    found = json.loads(cli(agent, "sessions", "--json", "--search", "Refund").stdout)
    assert [s["id"] for s in found["items"]] == [first.id]


def test_it_prints_a_sessions_events_once(agent, ops):
    session = ops.session(title="tailed")
    with ops.frame(session, goal="Look around", budget=1000) as frame:
        frame.usage(input_tokens=10, output_tokens=5)
    events = ops.events(session)
    result = cli(agent, "tail", session.id, "--once")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == len(events) >= 3
    for line, event in zip(lines, events, strict=True):
        assert line.split()[0] == str(event["seq"]) and event["type"] in line
    later = cli(agent, "tail", session.id, "--once", "--after", str(events[0]["seq"]), "--json")
    assert [json.loads(line) for line in later.stdout.splitlines()] == events[1:]


def follow(agent, session) -> subprocess.Popen:
    """``contextops tail SESSION`` in a process of its own, polling every 0.2 s."""
    env = {**os.environ, "CONTEXTOPS_URL": agent.url, "CONTEXTOPS_API_KEY": agent.key}
    return subprocess.Popen(
        [script(), "tail", session.id, "--interval", "0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_it_follows_a_session_as_it_happens_until_ctrl_c(agent, ops):
    session = ops.session(title="followed")
    follower = follow(agent, session)
    try:
        assert follower.stdout is not None
        first = follower.stdout.readline()  # what there was when it started
        with ops.frame(session, goal="Write the summary", budget=500):
            pass
        seen = [first]
        deadline = time.monotonic() + 20
        while not any("frame.popped" in line for line in seen):
            assert time.monotonic() < deadline, seen
            seen.append(follower.stdout.readline())
        assert any("frame.pushed" in line for line in seen)
    finally:
        follower.send_signal(signal.SIGINT)
        _, errors = follower.communicate(timeout=20)
    assert follower.returncode == 0, errors
    assert "Traceback" not in errors


# -- pack ----------------------------------------------------------------------------------


def test_it_prints_a_context_pack_as_a_table_with_its_totals_and_as_json(agent, ops):
    session = ops.session(title="Refunds")
    frame = ops.frame_push(session, goal="Answer the refund question", budget=100_000)
    system = ops.handle_add(frame, kind="system_prompt", content="Be brief.", priority="critical")
    receipt = ops.handle_add(frame, kind="document", content="Refunds need a receipt.")
    hours = ops.handle_add(frame, kind="document", content="The office opens at nine.")
    fact = ops.fact_write("office.city", "Lyon", source="user")
    ops.working_set_put(session, "step", 3)
    args = ("pack", session.id, "--budget", "2000", "--query", "refund receipt")
    result = cli(agent, *args)
    assert result.exit_code == 0, result.output
    *table, totals = result.stdout.splitlines()
    assert table[0].split() == ["RANK", "KIND", "ID", "TOKENS", "FORM", "SCORE", *PARTS, "REASON"]
    rows = {line.split()[2]: line.split() for line in table[1:]}
    # In before the ranking, unranked: the frame's breadcrumb and the critical handle.
    assert [rows[frame.id][i] for i in (0, 1, 4, 5, -1)] == ["-", "frame", "-", "-", "essential"]
    assert rows[frame.id][6:-1] == ["-"] * len(PARTS)  # no score, so no parts
    assert rows[system["id"]][:2] == ["-", "system_prompt"] and rows[system["id"]][-1] == "critical"
    # Then the ranking, from 1: the query puts the receipt first.
    assert rows[receipt["id"]][:2] == ["1", "document"] and rows[receipt["id"]][4] == "full"
    assert rows[receipt["id"]][-1] == "ranked" and float(rows[receipt["id"]][5]) > 0
    assert [rows[str(fact["id"])][1], rows["step"][1]] == ["fact", "working"]
    assert [line.split()[0] for line in table[1:]] == ["-", "-", "1", "2", "3", "4"]

    answer = json.loads(cli(agent, *args, "--json").stdout)
    assert answer["query"] == "refund receipt" and answer["session_id"] == session.id
    summary = answer["token_summary"]
    assert summary["budget"] == 2000 and summary["compaction_level"] == "none"
    assert totals == (
        f"used {summary['used']:,} of 2,000 tokens ({summary['remaining']:,} left), "
        "compaction_level none, format verbose; 0 dropped"
    )
    ranks = {s["handle_id"]: s["rank"] for s in answer["segments"]}
    ranks |= {str(f["id"]): f["rank"] for f in answer["facts"]}
    ranks |= {w["key"]: w["rank"] for w in answer["working_set"]}
    assert ranks == {
        i: None if r[0] == "-" else int(r[0]) for i, r in rows.items() if i != frame.id
    }
    assert hours["id"] in ranks


LONG = (
    "The carrier review for the northern depots covers pallet rates, fuel surcharges, "
    "late deliveries in the third quarter, the damaged-goods claims of March and the "
    "renewal terms of every contract that ends this year, vendor by vendor: Okonkwo."
)


def _pack_table(stdout: str) -> tuple[list[str], dict[str, list[str]], str]:
    """The table's header, its rows by id (the fixed columns, then the reason whole,
    which may hold spaces) and the totals line."""
    *table, totals = stdout.splitlines()
    fixed = 6 + len(PARTS)
    rows = {}
    for line in table[1:]:
        cells = line.split(maxsplit=fixed)
        assert cells[2] not in rows, line  # one row an item
        rows[cells[2]] = cells
    return table[0].split(), rows, totals


def test_pack_shows_every_item_in_and_out_with_its_score_parts_and_reason(agent, ops):
    session = ops.session(title="Carriers")
    frame = ops.frame_push(session, goal="Review the carriers", budget=100_000)
    ops.handle_add(frame, kind="system_prompt", content="You review carriers.", priority="critical")
    older = ops.handle_add(frame, kind="message", content="First draft. " + LONG)
    newer = ops.handle_add(frame, kind="message", content="Final draft. " + LONG)
    for index in range(20):
        note = f"Status note {index}: " + "the weekly sync moved, nothing else changed. " * 3
        ops.handle_add(frame, kind="message", content=note)
    ops.working_set_put(session, "step", 3)
    args = ("pack", session.id, "--budget", "500", "--query", "northern depots pallet rates")
    result = cli(agent, *args)
    assert result.exit_code == 0, result.output
    header, rows, totals = _pack_table(result.stdout)
    assert header == ["RANK", "KIND", "ID", "TOKENS", "FORM", "SCORE", *PARTS, "REASON"]

    answer = json.loads(cli(agent, *args, "--json").stdout)
    expected: dict[str, tuple[object, str, str, dict | None, str | None]] = {}
    for section, field in (("segments", "handle_id"), ("facts", "id"), ("working_set", "key")):
        for item in answer[section]:
            expected[str(item[field])] = (
                item["rank"],
                item["form"],
                item["reason"],
                item["score"],
                item["older_than"],
            )
    for item in answer["dropped"]:
        expected[str(item["id"])] = (
            item["rank"],
            "out",
            item["reason"],
            item["score"],
            item["older_than"],
        )
    assert answer["dropped"]  # the budget left some out
    assert totals.endswith(f"; {len(answer['dropped'])} dropped")
    # Every item in and out has its row (and the frame's breadcrumb one more).
    assert set(rows) == set(expected) | {frame.id}
    for item_id, (rank, form, reason, score, older_than) in expected.items():
        row = rows[item_id]
        assert row[0] == ("-" if rank is None else str(rank)), row
        assert row[4] == form and row[-1].split(";")[0] == reason, row
        if score is None:
            assert row[5:-1] == ["-"] * (1 + len(PARTS)), row
            continue
        shown = [float(cell) for cell in row[5:-1]]
        assert shown == [round(score[p.lower()], 3) for p in ["TOTAL", *PARTS]], row
        assert abs(sum(shown[1:]) - shown[0]) <= 0.0005 * len(PARTS), row  # they add up
        if older_than:
            assert row[-1].endswith(f"; older than {older_than[:8]}…"), row
    # Out rows carry the packer's reason; the older near-duplicate names the newer one.
    out = [rows[str(d["id"])] for d in answer["dropped"]]
    assert {row[1] for row in out} == {"handle"}
    assert {row[-1].split(";")[0] for row in out} == {"over_budget"}
    older_row = rows[older["id"]]
    assert float(older_row[6 + PARTS.index("OLDER")]) < 0
    assert older_row[-1].endswith(f"older than {newer['id'][:8]}…")
    # By rank: the required items first, unranked, then 1, 2, 3, ... in and out together.
    ranks = [line.split()[0] for line in result.stdout.splitlines()[1:-1]]
    assert ranks[:2] == ["-", "-"]
    assert ranks[2:] == [str(n) for n in range(1, len(ranks) - 1)]


def test_pack_takes_a_frame_and_prints_the_apis_error(agent, ops):
    session = ops.session(title="Frames")
    root = ops.frame_push(session, goal="Plan", budget=100_000)
    child = ops.frame_push(session, goal="Step", budget=1_000, parent=root)
    ops.handle_add(child, kind="document", content="Only the step sees this.")
    at_root = json.loads(cli(agent, "pack", session.id, "--frame", root.id, "--json").stdout)
    assert at_root["frame_id"] == root.id and at_root["segments"] == []
    assert at_root["token_summary"]["budget"] == 4000  # the default budget
    small = cli(agent, "pack", session.id, "--budget", "100")
    assert small.exit_code == 1 and small.stdout == ""
    assert "422 budget_too_small" in small.output and "500" in small.output
    missing = cli(agent, "pack", "00000000-0000-0000-0000-000000000000")
    assert missing.exit_code == 1 and "404 not_found" in missing.output
    assert ops.context_packs(session) and len(ops.context_packs(session)) == 1  # errors store none


# -- approve, reject ---------------------------------------------------------------------


def _suspended(ops) -> tuple[str, str]:
    session = ops.session(title="needs a person")
    root = ops.frame_push(session, goal="Refund", budget=5000)
    child = ops.frame_push(session, goal="Refund over $500", budget=1000, parent=root)
    return ops.frame_suspend(child, reason="Over the limit", requires_approval=True).token, child.id


def test_a_person_approves_from_the_terminal_and_the_agent_resumes(agent, ops):
    token, frame_id = _suspended(ops)
    result = cli(agent, "approve", token, "--note", "Fine this once", key=personal_key())
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == (
        f"Approved by grace (Fine this once): frame {frame_id} may resume."
    )
    assert ops.suspension_resume(token).status == "active"


def test_a_person_rejects_from_the_terminal_with_a_note(agent, ops):
    token, frame_id = _suspended(ops)
    key = personal_key()
    refused = cli(agent, "reject", token, key=key)
    assert refused.exit_code == 2 and "--note" in refused.output  # required, as in the inbox
    assert Suspension.objects.get(pk=token).status == "pending"
    result = cli(agent, "reject", token, "--note", "Needs finance", "--json", key=key)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["status"] == "rejected"
    assert Frame.objects.get(pk=frame_id).status == "failed"


def test_a_token_that_begins_with_a_dash_is_a_token_not_an_option(agent, ops):
    """Tokens are URL-safe base64, so one in 64 begins with "-"."""
    key = personal_key()
    for command in (("approve", "-Pno-such-token"), ("reject", "-Pno-such-token", "--note", "x")):
        result = cli(agent, *command, key=key)
        assert result.exit_code == 1, result.output
        assert "not_found" in result.output and "No such option" not in result.output


def test_an_agents_key_cannot_approve_from_the_terminal(agent, ops):
    token, frame_id = _suspended(ops)
    for args in (("approve", token), ("reject", token, "--note", "no")):
        result = cli(agent, *args)
        assert result.exit_code == 1
        assert "403 permission_denied" in result.output
    member = cli(agent, "approve", token, key=personal_key(username="ada", approver=False))
    assert member.exit_code == 1 and "403 permission_denied" in member.output
    assert Suspension.objects.get(pk=token).status == "pending"
    assert Frame.objects.get(pk=frame_id).status == "suspended"


# -- export ------------------------------------------------------------------------------


def test_it_exports_an_rlm_state_to_a_file_or_stdout(agent, ops, tmp_path):
    state = ops.rlm_state_create("Find the cheapest flight")
    ops.rlm_variable_put(state["state_id"], "candidates", ["AF 12", "LH 3"], type="array")
    expected = ops.rlm_state_export(state["state_id"])
    target = tmp_path / "state.json"
    result = cli(agent, "export", "rlm", state["state_id"], "-o", str(target))
    assert result.exit_code == 0, result.output
    assert json.loads(target.read_text()) == expected
    printed = cli(agent, "export", "rlm", state["state_id"])
    assert json.loads(printed.stdout) == expected
    # What it wrote goes back in.
    other = Client(agent.url, api_key_create(org_name="Globex", agent_name="b")[1])
    assert other.rlm_state_import(json.loads(target.read_text()))["state_id"] == state["state_id"]
    missing = cli(agent, "export", "rlm", "state-00000000", "-o", str(tmp_path / "none.json"))
    assert missing.exit_code == 1 and "404 not_found" in missing.output


# -- import ------------------------------------------------------------------------------


def test_it_imports_every_fixture_with_the_figures_import_transcript_prints(agent, celery_worker):
    differing = {}
    for path in TRANSCRIPTS:  # one test, one worker: starting a worker per file is slow
        result = cli(agent, "import", str(path), "--json")
        assert result.exit_code == 0, (path.name, result.output)
        summary = json.loads(result.stdout)
        expected = import_transcript_json(path, org="Globex")
        if {k: summary[k] for k in FIGURES} != {k: expected[k] for k in FIGURES}:
            differing[path.name] = (summary, expected)
        session = Session.objects.get(pk=summary["session_id"])
        assert session.organization == agent.organization
        assert Turn.objects.filter(session=session).count() == expected["turns"] > 0
        assert session.ended_at is not None, path.name
    assert differing == {}
    assert len(TRANSCRIPTS) == 14


def test_import_answers_have_exactly_the_keys_the_typed_dicts_declare(ops, celery_worker):
    queued = ops.import_create(
        SHORT.name,
        SHORT.read_text(),
        final=True,
        subagents=[{"file_name": "agent-a1.jsonl", "content": "", "offset": 0}],
    )
    job = ops.import_wait(queued, timeout=120)
    assert job["status"] == "completed", job
    session = ops.session_get(job["session_id"])
    errors = [
        *shape_errors(queued, ImportQueued, "queued"),
        *shape_errors(job, ImportJob, "job"),
        *shape_errors(session.data, SessionData, "session"),
    ]
    assert errors == []
    assert queued["subagents"] == [{"file_name": "agent-a1.jsonl", "received_bytes": 0}]
    assert session.data["source"]["file_name"] == SHORT.name


def test_the_async_client_imports_and_waits_too(agent, celery_worker):
    async def run():
        async with AsyncClient(agent.url, agent.key) as ops:
            seen: list[dict] = []
            queued = await ops.import_create(SHORT.name, SHORT.read_text())
            return await ops.import_wait(queued, timeout=120, progress=seen.append), seen

    job, seen = asyncio.run(run())
    assert job["status"] == "completed" and seen[-1] == job
    assert job["result"]["turns"] == import_transcript_json(SHORT, "Globex")["turns"]


def test_the_same_file_imported_twice_leaves_one_session(agent, celery_worker):
    first = cli(agent, "import", str(SHORT), "--json")
    assert first.exit_code == 0, first.output
    again = cli(agent, "import", str(SHORT), "--json")
    assert again.exit_code == 0, again.output
    one, two = json.loads(first.stdout), json.loads(again.stdout)
    assert two["session_id"] == one["session_id"] and two.get("unchanged") is True
    assert Session.objects.filter(organization=agent.organization).count() == 1
    human = cli(agent, "import", str(SHORT))
    assert "nothing changed" in human.stdout and one["session_id"] in human.stdout


def test_it_imports_every_claude_code_session_of_a_projects_folder(agent, celery_worker, tmp_path):
    projects = tmp_path / "projects"
    spotter = projects / "-home-user-spotter"
    shutil.copytree(SPOTTER.parent, spotter)
    viewer = projects / "-home-user-viewer"
    shutil.copytree(FIXTURES / "claude-code" / "claude-code-viewer", viewer)
    expected = sorted(p.name for p in projects.rglob("*.jsonl") if "subagents" not in p.parts)
    result = cli(agent, "import", "--claude-projects", str(projects), "--json")
    assert result.exit_code == 0, result.output
    summaries = json.loads(result.stdout)
    assert len(summaries) == len(expected) == 4
    assert Session.objects.filter(organization=agent.organization).count() == 4
    # The subagents went with their session, not as sessions of their own.
    spotter_summary = summaries[[p.name for p in sorted(_sessions(projects))].index(SPOTTER.name)]
    assert spotter_summary["frames"] == import_transcript_json(SPOTTER, org="Globex")["frames"]
    human = cli(agent, "import", "--claude-projects", str(projects))
    assert human.exit_code == 0 and human.stdout.count("nothing changed") == 4


def _sessions(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.jsonl") if "subagents" not in p.parts)


def test_it_finds_the_default_projects_folder_under_home(agent, celery_worker, tmp_path):
    folder = tmp_path / ".claude" / "projects" / "-repo"
    folder.mkdir(parents=True)
    shutil.copy(SHORT, folder / SHORT.name)
    env = {"CONTEXTOPS_URL": agent.url, "CONTEXTOPS_API_KEY": agent.key, "HOME": str(tmp_path)}
    result = CliRunner().invoke(main, ["import", "--claude-projects", "--json"], env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["turns"] == import_transcript_json(SHORT, "Globex")["turns"]


def test_it_says_which_file_failed_and_exits_non_zero(agent, celery_worker, tmp_path):
    broken = tmp_path / "notes.json"
    broken.write_text("this is not a transcript")
    result = cli(agent, "import", str(broken), str(SHORT))
    assert result.exit_code == 1
    assert str(broken) in result.stderr
    assert f"Imported {SHORT.name} as session" in result.stdout
    assert Session.objects.filter(organization=agent.organization).count() == 1


def test_tail_stops_by_itself_once_the_session_has_ended(agent, ops):
    session = ops.session(title="short-lived")
    follower = follow(agent, session)
    try:
        assert follower.stdout is not None
        follower.stdout.readline()  # it is following
        with ops.frame(session, goal="The only step", budget=500):
            pass
        ops.session_end(session)
        out, errors = follower.communicate(timeout=30)  # no Ctrl-C: it ends on its own
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
    assert follower.returncode == 0, errors
    assert out.splitlines()[-1].split()[2] == "session.ended"


def _claude_code_line(kind: str, index: int, text: str, parent: str | None) -> dict:
    stamp = f"2026-02-10T21:{index // 60 % 60:02d}:{index % 60:02d}.000Z"
    line = {
        "parentUuid": parent,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/home/ada/project",
        "sessionId": "8a0b6f1e-0000-4000-8000-000000000042",
        "version": "2.1.38",
        "type": kind,
        "uuid": f"00000000-0000-4000-8000-{index:012d}",
        "timestamp": stamp,
    }
    if kind == "user":
        line["message"] = {"role": "user", "content": text}
    else:
        line["message"] = {
            "model": "claude-opus-4-6",
            "id": f"msg_{index:08d}",
            "type": "message",
            "role": "assistant",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 10, "output_tokens": 20},
        }
        line["requestId"] = f"req_{index:08d}"
    return line


def large_transcript(path: Path, *, megabytes: float) -> Path:
    """A Claude Code transcript of about ``megabytes``: question and answer pairs."""
    lines, parent, index = [], None, 0
    size = 0
    while size < megabytes * 1024 * 1024:
        for kind in ("user", "assistant"):
            index += 1
            text = f"{kind} {index}: " + "context operations keep the window lean. " * 250
            line = json.dumps(_claude_code_line(kind, index, text, parent))
            parent = f"00000000-0000-4000-8000-{index:012d}"
            lines.append(line)
            size += len(line) + 1
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_first_import_of_a_large_transcript_says_it_was_imported(
    agent, celery_worker, tmp_path
):
    big = large_transcript(tmp_path / "big-session.jsonl", megabytes=2.9)
    assert big.stat().st_size > 2.8 * 1024 * 1024  # more than one upload part
    pairs = sum(1 for line in big.read_text().splitlines() if '"type": "user"' in line)
    first = cli(agent, "import", str(big))
    assert first.exit_code == 0, first.output
    assert f"{pairs} turns" in first.stdout and f"{pairs} model calls" in first.stdout
    assert "nothing changed" not in first.stdout
    summary = json.loads(cli(agent, "import", str(big), "--json").stdout)
    assert summary["unchanged"] is True and summary["turns"] == pairs  # the second time


def test_an_import_reports_its_bad_lines_also_when_the_session_was_there(
    agent, celery_worker, tmp_path
):
    lines = SHORT.read_text().splitlines()
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join([*lines[:5], "{this line is not JSON", *lines[5:]]) + "\n")
    first = json.loads(cli(agent, "import", str(broken), "--json").stdout)
    assert first["skipped_lines"] == 1, first
    again = json.loads(cli(agent, "import", str(broken), "--json").stdout)
    assert again["session_id"] == first["session_id"]
    assert again["skipped_lines"] == 1 and again["skipped"] == first["skipped"], again


def test_a_session_captured_live_then_imported_whole_reports_its_bad_lines(
    agent, celery_worker, tmp_path
):
    # Its own organization: the same session under another file name would continue the
    # transcript the first test's import holds (a re-import adds only what is new).
    lines = SHORT.read_text().splitlines()
    live = tmp_path / "live.jsonl"
    live.write_text("\n".join([*lines[:5], "{half a line", *lines[5:]]) + "\n")
    with Client(agent.url, agent.key) as ops:
        for job in upload(ops, claude_code_sources(live), final=False).jobs:
            assert ops.import_wait(job, timeout=120)["status"] == "completed"
    whole = json.loads(cli(agent, "import", str(live), "--json").stdout)
    assert whole["skipped_lines"] == 1, whole
