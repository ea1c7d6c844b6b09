"""The calls timeline on the session page and a call's own page with its anatomy."""

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from frames.conversation.importing.executing import transcript_import
from frames.conversation.readers import read_transcript
from frames.models import Usage
from tests.conversation.conftest import assistant, text, tool_result, tool_use
from tests.conversation.test_anatomy import SPOTTER

pytestmark = pytest.mark.usefixtures("prices")


@pytest.fixture
def imported(api):
    return transcript_import(
        organization=api.organization, transcript=read_transcript(SPOTTER)
    ).session


def test_the_timeline_lists_calls_with_links_to_their_pages(member_client, imported):
    html = member_client.get(f"/sessions/{imported.pk}/calls/", HTTP_HX_REQUEST="true")
    text = html.content.decode()
    assert html.status_code == 200 and "<html" not in text
    first = Usage.objects.filter(session=imported).order_by("created_at", "id").first()
    assert f"/sessions/{imported.pk}/calls/{first.pk}/" in text


def test_a_call_page_shows_its_anatomy_and_collapses_long_content(member_client, imported):
    call = Usage.objects.filter(session=imported).order_by("-created_at", "-id").first()
    page = member_client.get(f"/sessions/{imported.pk}/calls/{call.pk}/")
    html = page.content.decode()
    assert page.status_code == 200
    assert 'class="anatomy-bar"' in html and "System prompt and tools" in html
    assert "Tool results" in html and "<details>" in html
    assert "{&#x27;" not in html  # no Python reprs: JSON is shown formatted


def test_another_organizations_call_page_is_404(make_user, imported):
    outsider = Client()
    outsider.force_login(make_user(username="globex", org="Globex"))
    call = Usage.objects.filter(session=imported).first()
    assert outsider.get(f"/sessions/{imported.pk}/calls/{call.pk}/").status_code == 404
    assert outsider.get(f"/sessions/{imported.pk}/calls/").status_code == 404


def test_a_call_page_names_the_calls_place_in_the_session_not_its_id(
    api, make_session, member_client
):
    def call_sent(session, message_id, started_at):
        usage = {"input_tokens": 100, "output_tokens": 10, "message_id": message_id}
        usage["started_at"] = started_at.isoformat()
        body = {"messages": [{"role": "user", "content": message_id}], "usage": usage}
        assert api.post(f"/sessions/{session.pk}/messages", body).status_code == 200
        return Usage.objects.get(session=session, message_id=message_id)

    now = timezone.now()
    other = make_session()
    for i in range(3):
        call_sent(other, f"other-{i}", now)
    session = make_session()
    # Recorded first but sent last: the calls list shows it third, and so does its page.
    late = call_sent(session, "late", now + timedelta(seconds=30))
    first = call_sent(session, "first", now + timedelta(seconds=10))
    second = call_sent(session, "second", now + timedelta(seconds=20))
    listed = member_client.get(f"/sessions/{session.pk}/calls/").content.decode()
    links = [f"/sessions/{session.pk}/calls/{c.pk}/" for c in (first, second, late)]
    assert sorted(links, key=listed.index) == links
    in_order = (first, second, late)
    for position, call in enumerate(in_order, start=1):
        html = member_client.get(f"/sessions/{session.pk}/calls/{call.pk}/").content.decode()
        assert f"<h1>Model call {position} of 3 " in html
        assert f"<title>Model call {position} of 3" in html
        assert f"model call {position} of 3</nav>" in html
        # One step either way, in the same order, to the neighbours' pages.
        steps = re.findall(r'href="/sessions/[^/]+/calls/(\d+)/" rel="(prev|next)">([^<]+)<', html)
        expected = []
        if position > 1:
            expected.append(
                (str(in_order[position - 2].pk), "prev", f"← Model call {position - 1}")
            )
        if position < 3:
            expected.append((str(in_order[position].pk), "next", f"Model call {position + 1} →"))
        assert steps == expected, steps


def test_a_call_page_numbers_turns_and_messages_from_0_like_the_turn_list(
    api, session, member_client
):
    body = {
        "messages": [
            {"role": "user", "content": "Fix the parser. " * 20},
            {"role": "assistant", "content": [{"type": "text", "text": "Fixed."}]},
        ],
        "usage": {"input_tokens": 5_000, "output_tokens": 10},
    }
    assert api.post(f"/sessions/{session.pk}/messages", body).status_code == 200
    call = Usage.objects.get(session=session)
    turns = member_client.get(f"/sessions/{session.pk}/turns/").content.decode()
    assert "<strong>#0</strong>" in turns
    html = member_client.get(f"/sessions/{session.pk}/calls/{call.pk}/").content.decode()
    anatomy_html, request_html = html.split('id="call-request"')
    # The prompt is the session's first message, in its first turn: both numbered 0.
    assert "turn 0 · message 0" in anatomy_html and "message 1" not in anatomy_html
    assert "<strong>user</strong> · turn 0 · message 0 ·" in request_html
    assert "numbered from 0" in html


def test_the_request_heading_counts_the_messages_it_lists_in_words(api, session, member_client):
    frame = session.frames.get()
    usage = {"input_tokens": 100, "output_tokens": 10}
    assert api.post(f"/frames/{frame.pk}/usage", usage).status_code == 200
    bare = Usage.objects.get(session=session)
    body = {"messages": [{"role": "user", "content": "Only this."}], "usage": usage}
    api.post(f"/sessions/{session.pk}/messages", body)
    one = Usage.objects.filter(session=session).latest("id")
    messages = [{"role": "user" if i % 2 else "assistant", "content": f"m{i}"} for i in range(41)]
    api.post(f"/sessions/{session.pk}/messages", {"messages": messages, "usage": usage})
    many = Usage.objects.filter(session=session).latest("id")

    def heading(call):
        html = member_client.get(f"/sessions/{session.pk}/calls/{call.pk}/").content.decode()
        return html.split('id="call-request"')[1].split("</h2>")[0]

    assert heading(bare) == ">\n      <h2>Request"
    assert "the one message it read" in heading(one)
    # The first prompt and m0 to m39 were read; m40 is the reply.
    assert "the last 30 of the 41 messages it read" in heading(many)


def test_a_call_recorded_by_its_usage_alone_claims_no_category(api, session, member_client):
    frame = session.frames.get()
    usage = {
        "input_tokens": 700,
        "cache_creation_input_tokens": 150,
        "cache_read_input_tokens": 50,
        "output_tokens": 100,
    }
    assert api.post(f"/frames/{frame.pk}/usage", usage).status_code == 200
    call = Usage.objects.get(session=session)

    html = member_client.get(f"/sessions/{session.pk}/calls/{call.pk}/").content.decode()
    card = html.split('id="call-anatomy"')[1].split('id="call-request"')[0]
    assert "Only the usage of this call was recorded" in card
    assert "nothing says what its input held" in card
    assert "900 input tokens: 700 uncached, 150 written to the cache, 50 read from it" in card
    assert "100 output tokens" in card
    assert "System prompt and tools" not in card and "100.0%" not in card
    assert "anatomy-table" not in card and "anatomy-bar" not in card

    answer = api.get(f"/sessions/{session.pk}/calls/{call.pk}/anatomy").json()
    assert answer["from_messages"] is False and answer["full_input_tokens"] == 900
    assert all(c["tokens"] == 0 and not c["largest"] for c in answer["categories"])


def _anatomy_rows(html: str) -> dict[str, tuple[int, list[int]]]:
    """The call page's anatomy table: each category's tokens and its parts' tokens."""
    table = html.split('class="small anatomy-table"')[1].split("</table>")[0]
    rows = {}
    for row in re.findall(r'<tr data-category="(\w+)">(.*?)</tr>', table, re.S):
        category, cells = row
        tokens = re.search(r'<td class="num">([\d,]+)</td>', cells).group(1)
        parts = re.findall(r'<span class="muted">([\d,]+)', cells)
        rows[category] = (int(tokens.replace(",", "")), [int(p.replace(",", "")) for p in parts])
    return rows


def test_a_call_page_scales_each_categorys_parts_with_it(api, session, member_client):
    """Our tokenizer counts more than the model reported: the categories shrink to the
    reported input, and the parts listed under each one add up to what it shows."""
    messages = [
        {
            "role": "user",
            "content": [text("Read the parser. " * n) for n in (37, 23, 11)],
        },
        assistant(
            text("Looking at it. " * 19),
            text("Now the tests. " * 7),
            tool_use("r1", "Read", file_path="src/parser.py"),
        ),
        tool_result("r1", "def parse(): ... " * 29),
        assistant(text("Done.")),
    ]
    usage = {"input_tokens": 97, "output_tokens": 10}
    body = {"messages": messages, "usage": usage}
    assert api.post(f"/sessions/{session.pk}/messages", body).status_code == 200
    call = Usage.objects.get(session=session)

    html = member_client.get(f"/sessions/{session.pk}/calls/{call.pk}/").content.decode()
    rows = _anatomy_rows(html)
    assert "97 input tokens" in html
    assert sum(tokens for tokens, _ in rows.values()) == 97
    assert len(rows["user_text"][1]) == 3 and len(rows["assistant_text"][1]) == 2
    for category, (tokens, parts) in rows.items():
        assert sum(parts) == tokens, (category, tokens, parts)

    answer = api.get(f"/sessions/{session.pk}/calls/{call.pk}/anatomy").json()
    shown = {
        c["category"]: (c["tokens"], [p["tokens"] for p in c["largest"]])
        for c in answer["categories"]
    }
    assert shown == rows  # the API lists the same parts, scaled the same way


def test_a_call_page_reads_tool_calls_and_results_as_what_they_are(api, session, member_client):
    messages = [
        {"role": "user", "content": "Fix the parser"},
        assistant(text("Reading it first."), tool_use("r1", "Read", file_path="src/parser.py")),
        tool_result("r1", "def parse(): pass"),
        assistant(tool_use("b1", "Bash", command="make test")),
        tool_result("b1", [{"type": "text", "text": "1 failed"}], is_error=True),
    ]
    body = {"messages": messages, "usage": {"input_tokens": 90, "output_tokens": 10}}
    assert api.post(f"/sessions/{session.pk}/messages", body).status_code == 200
    call = Usage.objects.get(session=session)
    html = member_client.get(f"/sessions/{session.pk}/calls/{call.pk}/").content.decode()
    request = html[html.index('id="call-request"') : html.index('id="call-response"')]
    assert "Reading it first.\n\n[tool call: Read · r1]\n{\n  &quot;file_path&quot;" in request
    assert "[tool result · r1]\ndef parse(): pass" in request
    assert "[tool result · error · b1]\n1 failed" in request
    assert "&quot;type&quot;: &quot;tool_use&quot;" not in request  # no raw block JSON
