"""Seed 002's last two integration steps: a summary that forgets the files the summarized
turns worked on is flagged, and a compaction clears the window the last call measured
(the prompt cache's prefix no longer exists), so the pressure gauge follows at once."""

import pytest

from contextops.llm import AnthropicSummarizer, ExtractiveSummarizer
from frames.conversation.compaction import compaction_execute
from frames.conversation.selection import salient_files, summary_quality_warning
from frames.models import Frame
from tests.fakes.anthropic_server import AnthropicFakeServer, Reply

from .conftest import assistant, text, tool_use, user

FILES = ["billing.py", "invoice.ts", "schema.sql", "README.md"]


def test_it_finds_the_files_named_in_prompts_and_tool_inputs():
    texts = [
        'Fix src/billing.py and then "web/invoice.ts"',
        '{"file_path": "/repo/db/schema.sql", "note": "e.g. this, v1.2"}',
        "see README.md; billing.py again",
    ]
    assert salient_files(texts) == FILES


def test_the_warning_names_what_the_summary_left_out():
    assert summary_quality_warning("We fixed billing.py and invoice.ts.", FILES) == ""
    warning = summary_quality_warning("We fixed billing.py.", FILES)
    assert "names 1 of the 4 files" in warning
    assert "invoice.ts, schema.sql, README.md" in warning
    assert summary_quality_warning("Nothing.", FILES[:2]) == ""  # too few to judge


def _work(api, session, turns=6):
    for i in range(turns):
        name = FILES[i % len(FILES)]
        messages = [
            user(f"Step {i}: update {name} " + "with care " * 20),
            assistant(tool_use(f"e{i}", "Edit", file_path=f"/repo/{name}")),
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"e{i}", "content": "ok"}],
            },
            assistant(text(f"Updated {name}. " + "Details. " * 30)),
        ]
        response = api.post(f"/sessions/{session.id}/messages", {"messages": messages})
        assert response.status_code == 200, response.content


@pytest.fixture
def queued(api, session, django_capture_on_commit_callbacks):
    def make(**body):
        with django_capture_on_commit_callbacks(execute=False):
            response = api.post(f"/sessions/{session.id}/compactions", body)
        assert response.status_code == 202, response.content
        return response.json()["id"]

    return make


@pytest.mark.parametrize(
    "summary, flagged",
    [
        ("The user asked for several updates; they were made.", True),
        ("Updated billing.py, invoice.ts, schema.sql and README.md as asked.", False),
    ],
)
def test_a_summary_that_forgets_the_files_is_flagged_on_the_run(
    api, session, queued, summary, flagged
):
    _work(api, session)
    with AnthropicFakeServer() as server:
        server.script(Reply.message(summary))
        summarizer = AnthropicSummarizer(
            api_key="k", model="claude-test", base_url=server.base_url, sleep=lambda s: None
        )
        run_id = queued(strategy="summarize_oldest", keep_turns=1)
        compaction_execute(run_id=run_id, summarizer=summarizer)
    body = api.get(f"/compactions/{run_id}").json()
    assert body["status"] == "completed" and body["summary"] == summary
    assert ("files the summarized turns worked on" in (body["warning"] or "")) is flagged
    if flagged:
        assert "names 0 of the 4 files" in body["warning"]


def test_a_compaction_clears_the_measured_window_and_the_gauge_follows(
    api, make_session, django_capture_on_commit_callbacks
):
    session = make_session(context_window_tokens=4_000)
    _work(api, session)
    call = {"input_tokens": 3_500, "output_tokens": 100, "model": "claude-test"}
    response = api.post(
        f"/sessions/{session.id}/messages",
        {"messages": [user("And now?")], "usage": call},
    )
    assert response.status_code == 200, response.content
    before = api.get(f"/sessions/{session.id}").json()["pressure"]
    assert before["level"] == "critical"
    top = Frame.objects.get(session=session, parent__isnull=True)
    assert top.last_occupancy_tokens == 3_600
    with django_capture_on_commit_callbacks(execute=False):
        run_id = api.post(
            f"/sessions/{session.id}/compactions", {"strategy": "truncate_at", "keep_turns": 1}
        ).json()["id"]
    run = compaction_execute(run_id=run_id, summarizer=ExtractiveSummarizer())
    taken = run.original_tokens - run.final_tokens
    assert taken > 500
    top.refresh_from_db()
    assert top.last_occupancy_tokens == 3_600 - taken
    after = api.get(f"/sessions/{session.id}").json()["pressure"]
    assert after["utilization"] == pytest.approx((3_600 - taken) / 4_000, abs=1e-3)
    assert after["level"] != "critical"
