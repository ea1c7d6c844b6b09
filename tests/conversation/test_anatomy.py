"""A call's anatomy: what its input was made of, adding up to its full input."""

from pathlib import Path

import pytest

from contextops.llm import ExtractiveSummarizer
from contextops.tokens import count_tokens
from frames.conversation.anatomy import scaled_to
from frames.conversation.compaction import compaction_execute, compaction_request
from frames.conversation.importing.executing import transcript_import
from frames.conversation.models import Message, Turn
from frames.conversation.readers import read_transcript
from frames.models import Usage

from .conftest import assistant, text, tool_result, tool_use

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "transcripts"
SPOTTER = FIXTURES / "claude-code" / "spotter" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
CATEGORIES = {
    "system_and_tools",
    "user_text",
    "assistant_text",
    "thinking",
    "tool_calls",
    "tool_results",
    "summaries",
}


@pytest.fixture
def imported(api):
    report = transcript_import(organization=api.organization, transcript=read_transcript(SPOTTER))
    return report.session


def _full(call):
    return call.input_tokens + call.cache_creation_input_tokens + call.cache_read_input_tokens


def test_the_categories_of_an_imported_claude_code_call_add_up_to_its_full_input(api, imported):
    calls = list(Usage.objects.filter(session=imported).order_by("created_at", "id"))
    assert len(calls) > 3
    for call in (calls[1], calls[len(calls) // 2], calls[-1]):
        response = api.get(f"/sessions/{imported.pk}/calls/{call.pk}/anatomy")
        assert response.status_code == 200, response.content
        anatomy = response.json()
        assert anatomy["full_input_tokens"] == _full(call)
        assert anatomy["from_messages"] is True
        assert anatomy["output_tokens"] == call.output_tokens
        assert anatomy["window_tokens"] == imported.context_window_tokens
        by_name = {c["category"]: c for c in anatomy["categories"]}
        assert set(by_name) == CATEGORIES
        assert sum(c["tokens"] for c in anatomy["categories"]) == _full(call)
        assert all(c["tokens"] >= 0 for c in anatomy["categories"])
        # The system prompt and tool definitions are in no transcript: they are the residual.
        assert by_name["system_and_tools"]["tokens"] > 0
    late = api.get(f"/sessions/{imported.pk}/calls/{calls[-1].pk}/anatomy").json()
    by_name = {c["category"]: c for c in late["categories"]}
    assert by_name["user_text"]["tokens"] > 0 and by_name["tool_results"]["tokens"] > 0
    largest = by_name["tool_results"]["largest"]
    assert largest and largest[0]["tokens"] >= largest[-1]["tokens"] and largest[0]["ref"]


def test_it_answers_404_for_another_sessions_call_and_another_organization(
    api, other_api, imported, start_session
):
    call = Usage.objects.filter(session=imported).first()
    other_session = start_session()
    assert api.get(f"/sessions/{other_session['id']}/calls/{call.pk}/anatomy").status_code == 404
    assert other_api.get(f"/sessions/{imported.pk}/calls/{call.pk}/anatomy").status_code == 404
    assert api.get(f"/sessions/{imported.pk}/calls/nonsense/anatomy").status_code == 404


def _turn_sent(api, session, i: int) -> Usage:
    """Turn ``i`` of a live session: a task, an edit, its result and an answer, with the
    model call that answered it. Returns the call."""
    messages = [
        {"role": "user", "content": f"Task {i}: change part {i}. " + "Details. " * 40},
        assistant(text("Working."), tool_use(f"e{i}", "Edit", file_path=f"p{i}.py")),
        tool_result(f"e{i}", f"edited part {i}"),
        assistant(text(f"Done with part {i}. " + "Explanation. " * 30)),
    ]
    usage = {"input_tokens": 20_000 + 1_000 * i, "output_tokens": 200, "message_id": f"m{i}"}
    response = api.post(f"/sessions/{session.pk}/messages", {"messages": messages, "usage": usage})
    assert response.status_code == 200, response.content
    return Usage.objects.filter(session=session).latest("created_at", "id")


def _parts(answer: dict) -> list[dict]:
    return [part for c in answer["categories"] for part in c["largest"]]


def test_a_call_after_our_compaction_reads_its_summary_instead_of_the_turns_it_took(
    api, session, member_client
):
    calls = [_turn_sent(api, session, i) for i in range(5)]
    run = compaction_request(session=session, strategy="summarize_oldest", keep_turns=2)
    compaction_execute(run_id=run.pk, summarizer=ExtractiveSummarizer())
    run.refresh_from_db()
    taken = sorted(Turn.objects.filter(compaction_run=run).values_list("index", flat=True))
    assert taken == [0, 1, 2] and str(run.summary) == "summary of turns 0–2"
    after = _turn_sent(api, session, 5)

    answer = api.get(f"/sessions/{session.pk}/calls/{after.pk}/anatomy").json()
    refs = [part["ref"] for part in _parts(answer)]
    assert not [r for r in refs if r.startswith(("turn 0 ", "turn 1 ", "turn 2 "))], refs
    assert any(r.startswith("turn 3 ") for r in refs)
    by_name = {c["category"]: c for c in answer["categories"]}
    assert [p["what"] for p in by_name["summaries"]["largest"]] == ["summary of turns 0–2"]
    assert by_name["summaries"]["tokens"] == run.summary.tokens
    prompts = Message.objects.filter(session=session, role="user", turn__index__gte=3)
    user_text = sum(
        count_tokens(block["text"])
        for m in prompts
        for block in m.content
        if block.get("type") == "text"
    )
    assert by_name["user_text"]["tokens"] == user_text  # turns 3 to 5's prompts, no more

    html = member_client.get(f"/sessions/{session.pk}/calls/{after.pk}/").content.decode()
    anatomy_html, request_html = (
        html.split('id="call-request"')[0],
        html.split('id="call-request"')[1],
    )
    # The summary names the first task as the goal; the turns' own messages are not sent.
    assert "Task 1:" not in request_html and "edited part 2" not in request_html
    assert "Task 3:" in request_html and "summary of turns 0–2" in request_html
    assert "summary of turns 0–2" in anatomy_html

    before = api.get(f"/sessions/{session.pk}/calls/{calls[-1].pk}/anatomy").json()
    by_name = {c["category"]: c for c in before["categories"]}
    assert by_name["summaries"]["tokens"] == 0 and by_name["summaries"]["largest"] == []
    assert any(part["ref"].startswith("turn 0 ") for part in _parts(before))

    # A second run folds the first summary into its own: each call counts the one it read.
    _turn_sent(api, session, 6)
    second = compaction_request(session=session, strategy="summarize_oldest", keep_turns=3)
    compaction_execute(run_id=second.pk, summarizer=ExtractiveSummarizer())
    second.refresh_from_db()
    assert str(second.summary) == "summary of turns 3–3"
    last = _turn_sent(api, session, 7)
    for call, read, gone in ((after, "summary of turns 0–2", 3), (last, "summary of turns 3–3", 4)):
        answer = api.get(f"/sessions/{session.pk}/calls/{call.pk}/anatomy").json()
        by_name = {c["category"]: c for c in answer["categories"]}
        assert [p["what"] for p in by_name["summaries"]["largest"]] == [read]
        refs = [part["ref"] for part in _parts(answer)]
        assert not [r for r in refs if r.startswith(tuple(f"turn {i} " for i in range(gone)))]


@pytest.mark.parametrize(
    "counts, total, scaled",
    [
        ([149, 93, 45], 55, [28, 18, 9]),  # 28.55, 17.82, 8.62: the two largest remainders
        ([1, 1, 1], 2, [1, 1, 0]),  # equal remainders: the earlier first
        ([3, 5], 8, [3, 5]),
        ([0, 0], 10, [0, 0]),
        ([], 10, []),
    ],
)
def test_it_scales_counts_to_add_up_to_a_total(counts, total, scaled):
    assert scaled_to(counts, total) == scaled
