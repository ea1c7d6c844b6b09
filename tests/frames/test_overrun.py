"""A frame that spent past its total says by how much, in the API and on its pages."""

import re

import pytest
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext

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


@pytest.fixture
def hidden_overrun(api, start_session, push_ok):
    """An overspent frame three levels down: root, collapsed child, collapsed grandchild."""

    def build(overspend=True):
        session = start_session(title="Hidden overrun")
        root = push_ok(session["id"], 100_000, goal="Root")
        child = push_ok(session["id"], 20_000, parent=root["id"], goal="Child")
        grandchild = push_ok(session["id"], 5_000, parent=child["id"], goal="Grandchild")
        leaf = push_ok(session["id"], 1_000, parent=grandchild["id"], goal="Greedy leaf")
        spent = 5_000 if overspend else 500
        api.post(f"/frames/{leaf['id']}/usage", {"input_tokens": spent, "output_tokens": 10})
        ids = (root["id"], child["id"], grandchild["id"], leaf["id"])
        frames = (Frame.objects.get(pk=pk) for pk in ids)
        return Session.objects.get(pk=session["id"]), *frames

    return build


def _summary(page: str, frame: Frame) -> str:
    """The collapsible head of ``frame``'s node: its own part of the page, not its children's."""
    found = re.search(rf'<li class="tree-node" id="frame-{frame.pk}".*?</summary>', page, re.S)
    assert found, f"no collapsible node for {frame.goal}"
    return found.group(0)


MARK = "1 over budget below"


def test_a_collapsed_node_says_an_overrun_is_hidden_under_it(member_client, hidden_overrun):
    session, root, child, grandchild, _ = hidden_overrun()
    page = member_client.get(f"/sessions/{session.pk}/").content.decode()
    # The root opens with the page (its marker is there, hidden while open); its child is
    # collapsed, two levels above the overrun, and says so in words.
    assert "<details open>" in _summary(page, root)
    assert MARK in _summary(page, child) and 'class="overruns-below"' in _summary(page, child)
    assert "+4,010 over" not in page  # the overspent frame itself is not on the page yet
    # Expanding the child loads the grandchild, collapsed too, marked too.
    children = member_client.get(f"/frames/{child.pk}/children/").content.decode()
    assert MARK in _summary(children, grandchild)
    below = member_client.get(f"/frames/{grandchild.pk}/children/").content.decode()
    assert "+4,010 over" in below and "over budget below" not in below
    # The frame page's children card marks them too.
    frame_page = member_client.get(f"/frames/{root.pk}/").content.decode()
    assert MARK in _summary(frame_page, child)


def test_a_session_without_an_overrun_marks_nothing(member_client, hidden_overrun):
    session, root, child, _, _ = hidden_overrun(overspend=False)
    for address in (f"/sessions/{session.pk}/", f"/frames/{child.pk}/children/"):
        assert "over budget below" not in member_client.get(address).content.decode()


def test_an_imported_session_marks_nothing(member_client, hidden_overrun):
    session, *_ = hidden_overrun()
    Session.objects.filter(pk=session.pk).update(source={"format": "claude_code"})
    page = member_client.get(f"/sessions/{session.pk}/").content.decode()
    assert "over budget below" not in page


def test_the_marks_cost_one_query_whatever_the_depth_or_the_overruns(
    api, member_client, hidden_overrun, push_ok
):
    def count(address):
        with CaptureQueriesContext(connection) as queries:
            assert member_client.get(address).status_code == 200
        return len(queries)

    calm, _, calm_child, *_ = hidden_overrun(overspend=False)
    busy, busy_root, busy_child, grandchild, _ = hidden_overrun()
    for n in range(5):  # more nodes on the page, each asking nothing more
        push_ok(str(busy.pk), 100, parent=str(busy_root.pk), goal=f"Sibling {n}")
    parent, chain = grandchild.pk, []
    for level in range(6):  # more overspent frames, deeper
        frame = push_ok(str(busy.pk), 600 - 100 * level, parent=str(parent), goal=f"Deep {level}")
        parent = frame["id"]
        chain.append(parent)
    Frame.objects.filter(pk__in=chain).update(budget_used=F("budget_total") + 1)
    busy_page = member_client.get(f"/sessions/{busy.pk}/").content.decode()
    assert "7 over budget below" in _summary(busy_page, busy_child)
    assert count(f"/sessions/{calm.pk}/") == count(f"/sessions/{busy.pk}/")
    assert count(f"/frames/{calm_child.pk}/children/") == count(
        f"/frames/{busy_child.pk}/children/"
    )


def test_pages_show_json_formatted_never_python_reprs(api, member_client, start_session, push_ok):
    session = start_session(environment={"external_data": {"plan": "pro", "seats": 3}})
    frame = push_ok(session["id"], 1000, goal="Shaped inputs")
    Frame.objects.filter(pk=frame["id"]).update(inputs={"order": 4411, "urgent": True})
    page = member_client.get(f"/frames/{frame['id']}/").content.decode()
    assert "&quot;urgent&quot;: true" in page and "&#x27;urgent&#x27;" not in page
    session_page = member_client.get(f"/sessions/{session['id']}/").content.decode()
    assert "{&quot;plan&quot;: &quot;pro&quot;, &quot;seats&quot;: 3}" in session_page
    assert "&#x27;plan&#x27;" not in session_page
