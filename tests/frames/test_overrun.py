"""A frame that spent past its total says by how much, in the API and on its pages."""

import pytest

from frames.models import Frame, Session


def test_it_answers_the_overrun_of_an_overspent_frame(api, start_session, push_ok):
    session = start_session()
    frame = push_ok(session["id"], 1000)
    assert frame["budget"]["overrun"] == 0
    response = api.post(f"/frames/{frame['id']}/usage", {"input_tokens": 5000, "output_tokens": 10})
    assert response.status_code == 200
    budget = response.json()["budget"]
    assert (budget["used"], budget["available"], budget["overrun"]) == (5010, 0, 4010)
    assert api.get(f"/frames/{frame['id']}").json()["budget"]["overrun"] == 4010


@pytest.fixture
def overspent(api, start_session, push_ok):
    session = start_session(title="Overspent")
    root = push_ok(session["id"], 10_000, goal="Root")
    child = push_ok(session["id"], 1000, parent=root["id"], goal="Greedy child")
    api.post(f"/frames/{child['id']}/usage", {"input_tokens": 5000, "output_tokens": 10})
    return {"session": session, "root": root, "child": child}


def test_the_frame_page_shows_the_overrun_in_red(member_client, overspent):
    page = member_client.get(f"/frames/{overspent['child']['id']}/").content.decode()
    assert 'class="overrun"' in page and "+4,010 over" in page
    assert "used 5,010 / 1,000 total" in page and "available 0" in page


def test_the_tree_shows_the_overrun_of_each_node(member_client, overspent):
    # The tree opens at its first level: the roots' children come with the page.
    page = member_client.get(f"/sessions/{overspent['session']['id']}/").content.decode()
    assert "used 0 / 10,000" in page and "+4,010 over" in page and "<details open>" in page
    children = member_client.get(f"/frames/{overspent['root']['id']}/children/").content.decode()
    assert "+4,010 over" in children


def test_an_imported_session_shows_no_invented_budget(member_client, overspent):
    Session.objects.filter(pk=overspent["session"]["id"]).update(
        source={"format": "claude_code", "file_name": "a.jsonl", "source_session_id": "s"}
    )
    page = member_client.get(f"/frames/{overspent['child']['id']}/").content.decode()
    assert "no budget" in page and "+4,010 over" not in page and "/ 1,000 total" not in page
    tree = member_client.get(f"/sessions/{overspent['session']['id']}/").content.decode()
    assert "no budget" in tree and "/ 10,000" not in tree
    children = member_client.get(f"/frames/{overspent['root']['id']}/children/").content.decode()
    assert "no budget" in children and "over</strong>" not in children


def test_pages_show_json_formatted_never_python_reprs(api, member_client, start_session, push_ok):
    session = start_session(environment={"external_data": {"plan": "pro", "seats": 3}})
    frame = push_ok(session["id"], 1000, goal="Shaped inputs")
    Frame.objects.filter(pk=frame["id"]).update(inputs={"order": 4411, "urgent": True})
    page = member_client.get(f"/frames/{frame['id']}/").content.decode()
    assert "&quot;urgent&quot;: true" in page and "&#x27;urgent&#x27;" not in page
    session_page = member_client.get(f"/sessions/{session['id']}/").content.decode()
    assert "{&quot;plan&quot;: &quot;pro&quot;, &quot;seats&quot;: 3}" in session_page
    assert "&#x27;plan&#x27;" not in session_page
