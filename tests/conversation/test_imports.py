"""POST /api/v1/imports and GET /api/v1/imports/{id}: transcripts uploaded whole or in parts,
imported by a job, idempotent by source and content, looking like the session they came from.

Jobs run through the task itself (``import_run``), as a worker calls it, except in the one
test that runs them on a real worker.
"""

import io
import json
import random
import time
from datetime import datetime
from pathlib import Path

import pytest
from django.core.management import call_command

from frames.conversation.importing.executing import import_execute
from frames.conversation.importing.receiving import imports_requeue
from frames.conversation.models import Import, Message, TranscriptFile, Turn
from frames.conversation.tasks import import_run
from frames.models import Event, Frame, Session, Usage
from frames.projections import budget_audit, projection_diff
from tests.hardening.snapshots import organization_rows

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "transcripts"
SPOTTER = FIXTURES / "claude-code" / "spotter" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
SUBAGENTS = sorted((SPOTTER.with_suffix("") / "subagents").glob("agent-*.jsonl"))
SHORT = FIXTURES / "claude-code" / "spotter" / "short.jsonl"
SHORT_SESSION = "55604662-cf2a-4331-851a-ec234028f8ca"  # its sessionId
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
# What one request may carry (DATA_UPLOAD_MAX_MEMORY_SIZE is 2 MiB): bigger files go in parts.
PART_BYTES = 1_000_000


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def parts_of(path: Path, cuts: list[int]) -> list[tuple[int, str]]:
    """The file cut before each line number in ``cuts``: (byte offset, text) per part."""
    lines = lines_of(path)
    bounds = [0, *cuts, len(lines)]
    parts, offset = [], 0
    for start, end in zip(bounds, bounds[1:], strict=False):
        data = b"".join(lines[start:end])
        parts.append((offset, data.decode()))
        offset += len(data)
    return parts


def cuts_by_size(path: Path, size: int) -> list[int]:
    cuts, total = [], 0
    for number, line in enumerate(lines_of(path)):
        if total + len(line) > size and number:
            cuts.append(number)
            total = 0
        total += len(line)
    return cuts


def upload(api, path: Path, **body):
    body.setdefault("file_name", path.name)
    if "content" not in body:
        body["content"] = path.read_text()
    return api.post("/imports", body)


def run_jobs() -> list[Import]:
    """Run every queued job, oldest first, as a worker would."""
    ran = []
    for job in Import.objects.filter(status="queued").order_by("created_at"):
        import_run(job.pk)
        ran.append(Import.objects.get(pk=job.pk))
    return ran


def imported(api, path: Path, **body) -> dict:
    """Upload ``path`` (in parts when it is big) and run its jobs; the last job's answer."""
    cuts = cuts_by_size(path, PART_BYTES)
    subagents = [
        {"file_name": sub.name, "content": sub.read_text()}
        for sub in (SUBAGENTS if path == SPOTTER else [])
    ]
    parts = parts_of(path, cuts)
    for n, (offset, text) in enumerate(parts):
        last = n == len(parts) - 1
        response = upload(
            api,
            path,
            content=text,
            offset=offset,
            final=body.get("final", True) if last else False,
            subagents=subagents if n == 0 else [],
            **{k: v for k, v in body.items() if k != "final"},
        )
        assert response.status_code == 202, response.content
        run_jobs()
    answer = api.get(f"/imports/{response.json()['id']}")
    assert answer.status_code == 200
    assert answer.json()["status"] == "completed", answer.json()
    return answer.json()


def command_report(path: Path, org: str = "Globex") -> dict:
    out = io.StringIO()
    call_command(
        "import_transcript", str(path), "--org", org, "--json", stdout=out, stderr=io.StringIO()
    )
    return json.loads(out.getvalue())


def figures(report: dict) -> dict:
    return {k: v for k, v in report.items() if k not in ("session_id", "unchanged")}


def turns_of(session_id) -> list[tuple]:
    return [
        (
            t.branch,
            t.index,
            t.user_message,
            t.tool_calls,
            t.tool_results,
            t.assistant_response,
            t.thinking,
            t.tokens,
            t.previous_error,
            t.has_error,
            t.anchor,
            t.occupancy_tokens,
            t.frame.goal if t.frame else None,
            t.created_at,
            t.updated_at,
        )
        for t in Turn.objects.filter(session_id=session_id)
        .select_related("frame")
        .order_by("branch", "index")
    ]


def usage_of(session_id) -> list[tuple]:
    return sorted(
        (
            u.message_id,
            u.frame.goal,
            u.model,
            u.input_tokens,
            u.output_tokens,
            u.cache_creation_input_tokens,
            u.cache_read_input_tokens,
            u.created_at,
        )
        for u in Usage.objects.filter(session_id=session_id).select_related("frame")
    )


def first_timestamp(path: Path) -> datetime:
    for line in path.read_text().splitlines():
        stamp = json.loads(line).get("timestamp")
        if stamp:
            return datetime.fromisoformat(stamp)
    raise AssertionError("no timestamp")


def session_written(session_id) -> dict:
    """Everything an import writes into a session."""
    return {
        model.__name__: list(model.objects.filter(session_id=session_id).order_by("pk").values())
        for model in (Turn, Message, Usage, Event, Frame)
    } | {"Session": list(Session.objects.filter(pk=session_id).values())}


# -- The round trip -------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_it_imports_on_a_real_worker_and_reports_progress(celery_worker, api, other_api):
    response = upload(api, INIT)
    assert response.status_code == 202, response.content
    queued = response.json()
    assert queued["id"].startswith("imp-") and queued["status"] == "queued"
    assert queued["session_id"] is None
    assert queued["received_bytes"] == INIT.stat().st_size
    assert queued["source"] == {
        "format": "claude_code",
        "file_name": INIT.name,
        "source_session_id": INIT.stem,
        "tool_version": None,  # read by the job
    }
    deadline = time.monotonic() + 30
    while (job := api.get(f"/imports/{queued['id']}").json())["status"] in ("queued", "running"):
        assert time.monotonic() < deadline, job
        time.sleep(0.1)
    assert job["status"] == "completed", job
    assert job["error"] is None and job["finished_at"]
    entries = len(
        [
            line
            for line in INIT.read_text().splitlines()
            if json.loads(line)["type"] in ("user", "assistant")
        ]
    )
    assert job["progress"]["done"] == job["progress"]["total"] > entries  # messages and calls
    assert job["source"]["tool_version"] == "1.0.98"
    result = job["result"]
    assert result["session_id"] == job["session_id"] and result["unchanged"] is False
    assert figures(result) == figures(command_report(INIT))
    session = api.get(f"/sessions/{job['session_id']}").json()
    assert session["lifecycle_state"] == "ended"
    assert session["title"] == "/init"
    # Again, on the worker: nothing new, the same session.
    again = upload(api, INIT).json()
    assert again["session_id"] == job["session_id"]
    deadline = time.monotonic() + 30
    while (job := api.get(f"/imports/{again['id']}").json())["status"] != "completed":
        assert time.monotonic() < deadline, job
        time.sleep(0.1)
    assert job["result"]["unchanged"] is True
    assert job["result"]["session_id"] == session["id"]


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_fixture_imports_through_the_api_with_the_commands_figures(api, other_api, path):
    job = imported(api, path)
    assert figures(job["result"]) == figures(command_report(path))
    assert job["result"]["session_id"] == job["session_id"]
    assert Session.objects.get(pk=job["session_id"]).organization == api.organization


def test_the_same_file_twice_leaves_one_session_and_writes_nothing(api):
    first = imported(api, SHORT)
    before = session_written(first["session_id"])
    response = upload(api, SHORT)
    assert response.status_code == 202
    assert response.json()["session_id"] == first["session_id"]
    (job,) = run_jobs()
    assert job.result == {**first["result"], "unchanged": True}
    assert Session.objects.count() == 1
    assert session_written(first["session_id"]) == before
    # The operator's command shares the path: the same file again is the same session.
    out = io.StringIO()
    call_command("import_transcript", str(SHORT), "--org", "Acme", stdout=out)
    assert f"session {first['session_id']} (already imported: nothing new)" in out.getvalue()
    assert session_written(first["session_id"]) == before


def test_a_grown_file_imports_only_the_new_part_into_the_same_session(api, other_api):
    lines = lines_of(INIT)
    start = b"".join(lines[:15]).decode()  # through the results of the second response
    assert upload(api, INIT, content=start).status_code == 202  # final: the session ends
    (first,) = run_jobs()
    session_id = first.session_id
    assert Session.objects.get(pk=session_id).lifecycle_state == "ended"
    messages = Message.objects.filter(session_id=session_id).count()
    # The whole file again, as `contextops import` sends it: only the rest is new.
    response = upload(api, INIT)
    assert response.json()["received_bytes"] == INIT.stat().st_size
    assert response.json()["session_id"] == str(session_id)
    (job,) = run_jobs()
    assert job.result["session_id"] == str(session_id) and job.result["unchanged"] is False
    # The figures of the whole file, and a second root frame for the part after the end.
    assert figures(job.result) == figures(command_report(INIT)) | {"frames": 2}
    session = Session.objects.get(pk=session_id)
    assert session.lifecycle_state == "ended"  # reopened for the new part, then ended again
    types = list(Event.objects.filter(session=session).values_list("type", flat=True))
    assert types.count("session.ended") == 2 and "session.reopened" in types
    imports = Event.objects.filter(session=session, type="conversation.imported")
    assert [e.payload["import_id"] for e in imports] == [first.pk, job.pk]
    assert Message.objects.filter(session_id=session_id).count() - messages == len(lines) - 15
    assert Session.objects.filter(organization=api.organization).count() == 1
    assert projection_diff(session) == [] and budget_audit(session) == []


def test_a_final_import_that_grows_inside_a_response_writes_nothing_twice(api):
    lines = lines_of(SHORT)
    upload(api, SHORT, content=b"".join(lines[:7]).decode())  # three of a response's five lines
    (first,) = run_jobs()
    upload(api, SHORT)
    (job,) = run_jobs()
    assert job.status == "completed" and job.session_id == first.session_id
    assert job.result["api_calls"] == 1  # the response's usage, recorded once
    assert Message.objects.filter(session_id=job.session_id).count() == 9
    assert job.result["tool_calls"] == 2 and job.result["tool_errors"] == 2


# -- In parts, as Claude Code's hook sends them ---------------------------------------------


# Cuts inside responses whose lines report growing usage (spotter: lines 7-14, 33-41,
# 59-67, 70-75; viewer: 4-6, 12-15, 226-228), and at random lines.
PARTED = [(SPOTTER, SUBAGENTS, [8, 36, 60, 72]), (VIEWER, [], [5, 13, 227])]


@pytest.mark.parametrize(
    "path,subagents,inside", PARTED, ids=["2.x with subagent files", "1.0.x inline subagents"]
)
def test_parts_at_line_boundaries_import_exactly_what_the_whole_file_does(
    api, other_api, path, subagents, inside
):
    """The file cut into parts at lines (splitting responses whose lines share a message
    id), each part sent with only what was added since, not final, with the subagent files'
    parts alongside, then the end with nothing more (Claude Code's SessionEnd)."""
    rng = random.Random(14)
    main_lines = len(lines_of(path))
    main_parts = parts_of(path, sorted({*inside, *rng.sample(range(80, main_lines), 12)}))
    sub_parts = {
        sub.name: parts_of(sub, sorted(rng.sample(range(1, len(lines_of(sub))), 3)))
        for sub in subagents
    }
    for n, (offset, text) in enumerate(main_parts):
        parts = [
            {"file_name": name, "offset": parts[n][0], "content": parts[n][1]}
            for name, parts in sub_parts.items()
            if n < len(parts)
        ]
        body = {"content": text, "offset": offset, "final": False, "subagents": parts}
        response = upload(api, path, **body)
        assert response.status_code == 202, response.content
        assert response.json()["received_bytes"] == offset + len(text.encode())
        (job,) = run_jobs()
        assert job.status == "completed", job.error
        assert Session.objects.get(pk=job.session_id).lifecycle_state != "ended"
    end = upload(api, path, content="", offset=path.stat().st_size, final=True)
    assert end.status_code == 202, end.content
    (job,) = run_jobs()
    one_shot = command_report(path)
    assert figures(job.result) == figures(one_shot)
    assert turns_of(job.session_id) == turns_of(one_shot["session_id"])
    assert usage_of(job.session_id) == usage_of(one_shot["session_id"])
    ours = Session.objects.get(pk=job.session_id)
    theirs = Session.objects.get(pk=one_shot["session_id"])
    assert ours.usage_totals == theirs.usage_totals
    assert ours.started_at == theirs.started_at == first_timestamp(path)
    assert (ours.ended_at, ours.lifecycle_state) == (theirs.ended_at, "ended")
    children = Frame.objects.filter(session=ours, parent__isnull=False)
    assert sorted(children.values_list("goal", "status")) == sorted(
        Frame.objects.filter(session=theirs, parent__isnull=False).values_list("goal", "status")
    )
    assert children.count() == job.result["frames"] - 1 > 0
    assert projection_diff(ours) == [] and budget_audit(ours) == []  # the log agrees


def test_a_first_part_without_a_prompt_is_renamed_when_the_prompt_arrives(api, other_api):
    """A live capture's first part may hold only Claude Code's preamble (no prompt yet): the
    session and its root frame are named for the file until the prompt comes, then for it,
    logged, exactly as a one-shot import names them."""
    first, rest = parts_of(SHORT, [2])
    for (offset, text), final in ((first, False), (rest, True)):
        response = upload(api, SHORT, content=text, offset=offset, final=final)
        assert response.status_code == 202, response.content
        (job,) = run_jobs()
        assert job.status == "completed", job.error
        if not final:
            named = Session.objects.get(pk=job.session_id)
            assert named.title == SHORT.name
    ours = Session.objects.get(pk=job.session_id)
    theirs = Session.objects.get(pk=command_report(SHORT)["session_id"])
    assert ours.title == theirs.title != SHORT.name
    root = Frame.objects.get(session=ours, parent__isnull=True)
    assert root.goal == Frame.objects.get(session=theirs, parent__isnull=True).goal == ours.title
    renamed = Event.objects.get(session=ours, type="frame.updated", frame_id=root.pk)
    assert renamed.payload == {"goal": ours.title, "from": {"goal": SHORT.name}}
    assert projection_diff(ours) == []


def test_a_part_cut_inside_a_line_waits_for_the_rest_of_it(api, other_api):
    data = SHORT.read_bytes()
    cut = data.index(b"tool_use") + 3  # inside a line, inside a response
    for offset, chunk, final in ((0, data[:cut], False), (cut, data[cut:], True)):
        response = upload(api, SHORT, content=chunk.decode(), offset=offset, final=final)
        assert response.status_code == 202, response.content
        (job,) = run_jobs()
        assert job.result["skipped_lines"] == 0
    assert figures(job.result) == figures(command_report(SHORT))


def test_a_json_transcript_in_parts_is_read_once_whole(api, other_api):
    data = TAU.read_bytes()
    half = len(data) // 2
    response = upload(api, TAU, content=data[:half].decode(), format="openai", final=False)
    assert response.status_code == 202, response.content
    (job,) = run_jobs()
    assert (job.status, job.result, job.session_id) == ("completed", None, None)
    upload(api, TAU, content=data[half:].decode(), offset=half)
    (job,) = run_jobs()
    assert figures(job.result) == figures(command_report(TAU))


# -- Looking like the source ----------------------------------------------------------------


def test_the_session_starts_at_the_first_timestamp_with_a_real_title_and_ends(api, member_client):
    job = imported(api, INIT)
    session = api.get(f"/sessions/{job['session_id']}").json()
    assert datetime.fromisoformat(session["started_at"]) == first_timestamp(INIT)
    assert session["title"] == "/init"  # not "<command-message>init is analyzing…"
    assert session["lifecycle_state"] == "ended" and session["ended_at"]
    assert session["source"] == {
        "format": "claude_code",
        "file_name": INIT.name,
        "source_session_id": "1af7fc5e-8455-4414-9ccd-011d40f70b2a",
        "tool_version": "1.0.98",
    }
    first = Turn.objects.filter(session_id=job["session_id"]).order_by("index").first()
    assert first.created_at == first_timestamp(INIT)
    events = Event.objects.filter(session_id=job["session_id"]).order_by("seq")
    assert events.first().created_at == first_timestamp(INIT)
    assert all(e.created_at.year == 2025 for e in events)
    page = member_client.get(f"/sessions/{job['session_id']}/").content.decode()
    assert "Claude Code 1.0.98 transcript" in page and INIT.name in page
    assert "2025-09-03 00:47:19" in page
    listing = member_client.get("/").content.decode()
    assert "/init" in listing and "2025-09-03 00:47" in listing


def test_a_summary_line_titles_the_session_and_an_upload_may_name_it(api):
    viewer = imported(api, VIEWER)
    assert Session.objects.get(pk=viewer["session_id"]).title == (
        "Empty Repo Setup: CLAUDE.md Foundation Created"
    )
    named = imported(api, SHORT, title="Why phx.server fails")
    assert Session.objects.get(pk=named["session_id"]).title == "Why phx.server fails"
    tau = imported(api, TAU)
    assert Session.objects.get(pk=tau["session_id"]).title.startswith("Hi! I need to change")


def test_a_transcript_still_being_written_stays_open_until_its_end(api):
    name = f"{SHORT_SESSION}.jsonl"  # as Claude Code names it, and its hook sends it
    started = upload(api, SHORT, file_name=name, content="", final=False)  # SessionStart
    assert started.status_code == 202, started.content
    (job,) = run_jobs()
    assert (job.status, job.session_id, job.result) == ("completed", None, None)
    data = SHORT.read_bytes()
    response = upload(api, SHORT, file_name=name, content=data.decode(), final=False)
    (job,) = run_jobs()
    session = Session.objects.get(pk=job.session_id)
    assert session.lifecycle_state == "active"
    # The last response may still get lines: its usage waits.
    assert Usage.objects.filter(session=session).count() == 0
    end = upload(api, SHORT, file_name=name, content="", offset=response.json()["received_bytes"])
    assert end.json()["session_id"] == str(session.pk)
    (job,) = run_jobs()
    session.refresh_from_db()
    assert session.lifecycle_state == "ended"
    assert Usage.objects.filter(session=session).count() == 1
    assert set(Frame.objects.filter(session=session).values_list("status", flat=True)) == {
        "completed"
    }


# -- Refusals -------------------------------------------------------------------------------


def test_a_gap_or_a_different_overlap_is_a_409_naming_the_offset_to_send_from(api, other_api):
    lines = lines_of(SHORT)
    head = b"".join(lines[:5])
    assert upload(api, SHORT, content=head.decode(), final=False).status_code == 202
    before = organization_rows("Acme")
    rest = b"".join(lines[6:]).decode()
    gap = upload(api, SHORT, content=rest, offset=len(head) + len(lines[5]), final=False)
    assert gap.status_code == 409
    assert gap.json() | {"detail": ""} == {
        "error": "import_offset_mismatch",
        "detail": "",
        "expected_offset": len(head),
        "file_name": SHORT.name,
    }
    changed = head[:-20] + b"X" * 19 + b"\n"
    overlap = upload(api, SHORT, content=changed.decode(), offset=0, final=False)
    assert overlap.status_code == 409 and overlap.json()["expected_offset"] == len(head)
    sub = {"file_name": "agent-x.jsonl", "content": lines[0].decode(), "offset": 10}
    subagent_gap = upload(api, SHORT, content="", offset=len(head), subagents=[sub])
    assert subagent_gap.status_code == 409
    assert subagent_gap.json()["expected_offset"] == 0
    assert subagent_gap.json()["file_name"] == "agent-x.jsonl"
    assert organization_rows("Acme") == before
    # A resend of what is held, and the rest from where it ends, are fine.
    resent = upload(api, SHORT, content=head.decode(), offset=0, final=False)
    assert resent.status_code == 202 and resent.json()["received_bytes"] == len(head)
    rest = upload(api, SHORT, content=b"".join(lines[5:]).decode(), offset=len(head))
    assert rest.status_code == 202
    run_jobs()
    assert figures(Import.objects.get(pk=rest.json()["id"]).result) == figures(
        command_report(SHORT)
    )


def test_another_organizations_import_is_not_found(api, other_api):
    job = imported(api, SHORT)
    response = other_api.get(f"/imports/{job['id']}")
    assert response.status_code == 404 and response.json()["error"] == "not_found"
    assert api.get("/imports/imp-0000000000000000").status_code == 404
    # The same file from another organization is its own source and session.
    theirs = imported(other_api, SHORT)
    assert theirs["session_id"] != job["session_id"] and theirs["result"]["unchanged"] is False
    assert Session.objects.get(pk=theirs["session_id"]).organization == other_api.organization


BAD_BODIES = [
    ("no file name", {"content": "x"}, ["body", "file_name"]),
    ("no content", {"file_name": "a.jsonl"}, ["body", "content"]),
    ("empty file name", {"file_name": "", "content": "x"}, ["body", "file_name"]),
    ("file name too long", {"file_name": "a" * 501, "content": "x"}, ["body", "file_name"]),
    ("a folder", {"file_name": "dir/", "content": "x"}, ["body", "file_name"]),
    ("negative offset", {"file_name": "a.jsonl", "content": "x", "offset": -1}, ["body", "offset"]),
    ("unknown format", {"file_name": "a.json", "content": "[]", "format": "csv"}, ["body", "format"]),
    ("final not a bool", {"file_name": "a.jsonl", "content": "", "final": "maybe"}, ["body", "final"]),
    ("title too long", {"file_name": "a.jsonl", "content": "", "title": "t" * 301}, ["body", "title"]),
    ("content not text", {"file_name": "a.jsonl", "content": ["x"]}, ["body", "content"]),
    ("subagents not a list", {"file_name": "a.jsonl", "content": "", "subagents": "x"}, ["body", "subagents"]),
    ("subagent without content", {"file_name": "a.jsonl", "content": "", "subagents": [{"file_name": "agent-1.jsonl"}]}, ["body", "subagents", 0, "content"]),
    ("subagents of a JSON transcript", {"file_name": "t.json", "content": "[]", "format": "openai", "subagents": [{"file_name": "agent-1.jsonl", "content": ""}]}, ["body", "subagents"]),
    ("a subagent sent twice", {"file_name": "a.jsonl", "content": "", "subagents": [{"file_name": "agent-1.jsonl", "content": ""}, {"file_name": "agent-1.jsonl", "content": ""}]}, ["body", "subagents", 1, "file_name"]),
    ("a format no one can tell", {"file_name": "notes.txt", "content": "hello"}, ["body", "format"]),
    ("a final JSON document that is not one", {"file_name": "t.json", "content": "[{", "format": "openai"}, ["body", "content"]),
    ("no messages in it", {"file_name": "t.json", "content": "{}", "format": "anthropic"}, ["body", "content"]),
]  # fmt: skip


@pytest.mark.parametrize("label,body,loc", BAD_BODIES, ids=[b[0] for b in BAD_BODIES])
def test_bad_bodies_are_422_and_store_nothing(api, label, body, loc):
    before = organization_rows("Acme")
    response = api.post("/imports", body)
    assert response.status_code == 422, response.content
    answer = response.json()
    assert answer["error"] == "validation_error" and answer["detail"]
    assert answer["errors"][0]["loc"] == loc, answer
    assert organization_rows("Acme") == before


def test_too_large_is_a_413_with_the_limit(api, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 5_000
    response = upload(api, SHORT)
    assert response.status_code == 413
    assert response.json()["error"] == "too_large" and response.json()["limit"] == 5_000
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024
    settings.CONTEXTOPS_IMPORT_MAX_BYTES = 8_000  # what one transcript may hold in all
    lines = lines_of(SHORT)
    head = b"".join(lines[:5])
    assert len(head) < 8_000 < SHORT.stat().st_size
    assert upload(api, SHORT, content=head.decode(), final=False).status_code == 202
    before = list(TranscriptFile.objects.values())
    grown = upload(api, SHORT, content=b"".join(lines[5:]).decode(), offset=len(head))
    assert grown.status_code == 413
    assert grown.json()["error"] == "too_large" and grown.json()["limit"] == 8_000
    assert list(TranscriptFile.objects.values()) == before
    assert Import.objects.count() == 1


def test_a_job_delivered_twice_runs_once(api):
    response = upload(api, SHORT)
    job_id = response.json()["id"]
    import_run(job_id)
    done = Import.objects.get(pk=job_id)
    written = session_written(done.session_id)
    import_run(job_id)  # the broker delivers it again
    job = Import.objects.get(pk=job_id)
    assert job.status == "completed" and session_written(job.session_id) == written
    assert (job.result, job.finished_at) == (done.result, done.finished_at)  # not run again
    assert job.result["unchanged"] is False


def _spotter_in_parts(api):
    """The spotter transcript uploaded in parts of PART_BYTES (subagents with the first),
    no job run: the answer to the last part's upload."""
    subagents = [{"file_name": sub.name, "content": sub.read_text()} for sub in SUBAGENTS]
    parts = parts_of(SPOTTER, cuts_by_size(SPOTTER, PART_BYTES))
    for offset, text in parts[:-1]:
        upload(api, SPOTTER, content=text, offset=offset, final=False, subagents=subagents)
        subagents = []
    offset, text = parts[-1]
    return upload(api, SPOTTER, content=text, offset=offset)


def test_progress_is_recorded_batch_by_batch_and_a_failed_job_is_resumed(api, other_api):
    """A job writes in batches, each committed with its progress; when one fails, what
    was written stays and the next upload's job goes on to the whole file's figures."""
    response = _spotter_in_parts(api)
    seen = []

    def fail_on_the_third_batch(done, total):
        seen.append((done, total, Import.objects.get(pk=response.json()["id"]).progress_done))
        if len(seen) == 3:
            raise OSError("disk full")

    job = import_execute(import_id=response.json()["id"], progress=fail_on_the_third_batch)
    assert job.status == "failed" and job.error["error"] == "internal_error"
    assert [done for done, _, _ in seen] == [stored for _, _, stored in seen]
    assert seen[0][0] < seen[1][0] < seen[2][0] <= seen[0][1]
    assert Turn.objects.filter(session_id=job.session_id).exists()  # two batches stayed
    again = upload(api, SPOTTER, content="", offset=SPOTTER.stat().st_size)
    *_, resumed = run_jobs()  # the parts' own jobs, then this one
    assert resumed.pk == again.json()["id"] and resumed.session_id == job.session_id
    assert figures(resumed.result) == figures(command_report(SPOTTER))


def test_jobs_queued_while_the_broker_was_down_are_sent_again(api):
    upload(api, SHORT)  # the test's transaction never commits: its job was never sent
    assert imports_requeue(older_than_seconds=60) == 0  # not stuck yet
    assert imports_requeue(older_than_seconds=0) == 1
    run_jobs()
    assert imports_requeue(older_than_seconds=0) == 0  # done: nothing to send


def test_a_json_transcript_changed_where_it_was_imported_fails_its_job_and_writes_nothing(api):
    first = imported(api, TAU)
    written = session_written(first["session_id"])
    text = TAU.read_text()
    said = "Your reservation is in basic economy"
    assert text.index(said) > 1024  # past what names the source
    changed = text.replace(said, "Your reservation is in first class")
    response = upload(api, TAU, content=changed)
    assert response.status_code == 202 and response.json()["session_id"] == first["session_id"]
    (job,) = run_jobs()
    assert job.status == "failed"
    assert job.error["error"] == "transcript_changed" and TAU.name in job.error["detail"]
    assert session_written(first["session_id"]) == written


def test_a_part_uploaded_while_the_last_parts_job_runs_is_imported_once_and_whole(api, other_api):
    """A worker with several threads may run two jobs of one transcript at once: the job
    of a part, and the job of the next part uploaded while it runs. The older job's copy
    of the file is shorter; it must stop where the newer job took over, not fail the
    import as a changed transcript, and the session must hold the file exactly once."""
    lines = lines_of(SPOTTER)
    (first_offset, first_text), (second_offset, second_text) = parts_of(SPOTTER, [len(lines) // 2])
    subagents = [{"file_name": sub.name, "content": sub.read_text()} for sub in SUBAGENTS]
    first = upload(
        api, SPOTTER, content=first_text, offset=first_offset, final=False, subagents=subagents
    )
    assert first.status_code == 202, first.content
    newer: list[str] = []

    def upload_and_run_the_next_part(done, total):
        if newer:
            return
        second = upload(api, SPOTTER, content=second_text, offset=second_offset, final=True)
        assert second.status_code == 202, second.content
        newer.append(second.json()["id"])
        import_run(newer[0])  # the newer job runs to its end while the older one is mid-file

    import_execute(import_id=first.json()["id"], progress=upload_and_run_the_next_part)
    older, latest = Import.objects.get(pk=first.json()["id"]), Import.objects.get(pk=newer[0])
    assert (older.status, older.error) == ("completed", None)
    assert (latest.status, latest.error) == ("completed", None)
    one_shot = command_report(SPOTTER)
    assert figures(latest.result) == figures(one_shot)
    assert turns_of(latest.session_id) == turns_of(one_shot["session_id"])
    assert usage_of(latest.session_id) == usage_of(one_shot["session_id"])


def test_a_job_run_again_after_its_worker_died_never_reports_more_done_than_its_total(
    api, settings
):
    """The worker dies after two batches (the database connection it had is gone: the job
    stays running); once the claim is stale, the job runs again from where it stopped. Its
    progress then counts what both runs wrote against the whole import's total."""
    import time_machine
    from django.db import OperationalError

    job_id = _spotter_in_parts(api).json()["id"]
    seen: list[tuple[int, int]] = []

    def die_on_the_second_batch(done, total):
        if len(seen) == 1:
            raise OperationalError("server closed the connection unexpectedly")
        seen.append((done, total))

    with pytest.raises(OperationalError):
        import_execute(import_id=job_id, progress=die_on_the_second_batch)
    first = Import.objects.get(pk=job_id)
    assert first.status == "running" and 0 < first.progress_done < first.progress_total
    later = time_machine.travel(
        first.started_at.timestamp() + settings.CONTEXTOPS_IMPORT_STALE_SECONDS + 1, tick=False
    )
    with later:
        job = import_execute(
            import_id=job_id,
            progress=lambda done, total: seen.append(
                (Import.objects.get(pk=job_id).progress_done, total)
            ),
        )
    assert job is not None and job.status == "completed"
    assert job.progress_total == first.progress_total  # the whole import, both runs
    assert job.progress_done == job.progress_total
    stored = Import.objects.get(pk=job_id)
    assert all(done <= stored.progress_total for done, _ in seen)


def test_a_session_imported_again_under_another_file_name_adds_only_what_is_new(api, other_api):
    """Claude Code names a transcript by its session id: the same session uploaded again
    as another file (renamed, copied, exported twice) is the transcript already held.
    First half, then the whole under a new name: the session holds what one import of
    the whole holds; the whole a third time under yet another name adds nothing."""
    text = SHORT.read_text()
    lines = text.splitlines(keepends=True)
    half = "".join(lines[: len(lines) // 2])
    upload(api, SHORT, file_name="first-half.jsonl", content=half)
    (first,) = run_jobs()
    upload(api, SHORT, file_name="renamed-export.jsonl", content=text)
    (second,) = run_jobs()
    assert second.session_id == first.session_id
    written = session_written(second.session_id)
    upload(api, SHORT, file_name="copy-of-it.jsonl", content=text)
    (third,) = run_jobs()
    assert third.result["unchanged"] is True
    assert session_written(second.session_id) == written
    turns = Turn.objects.filter(session_id=second.session_id).count()
    alone = imported(other_api, SHORT)  # the whole, once, in another organization
    assert turns == Turn.objects.filter(session_id=alone["session_id"]).count()
