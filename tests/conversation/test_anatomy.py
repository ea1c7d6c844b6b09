"""A call's anatomy: what its input was made of, adding up to its full input."""

from pathlib import Path

import pytest

from frames.conversation.importing import transcript_import
from frames.conversation.readers import read_transcript
from frames.models import Usage

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
