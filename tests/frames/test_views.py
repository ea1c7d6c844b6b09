"""Dashboard pages for sessions and frames."""

import re

from django.db import connection
from django.test.utils import CaptureQueriesContext

from frames.context import lifecycle
from frames.models import Event, Frame, Session, Usage
from frames.services.handles import handle_add
from frames.services.sessions import session_create
from frames.services.stack import frame_pop, frame_push, frame_reserve
from frames.services.usage import usage_record


def _session(api, title="Research session", **kwargs):
    return session_create(
        organization=api.organization,
        agent=api.agent,
        identity={"user_name": "Ada"},
        title=title,
        **kwargs,
    )


def _wide_tree(session, width):
    root = frame_push(session=session, goal="Root goal", budget_total=10**8)
    Frame.objects.bulk_create(
        Frame(
            session=session,
            organization=session.organization,
            parent=root,
            depth=1,
            goal=f"Child {i}",
            budget_total=10,
        )
        for i in range(width)
    )
    Frame.objects.filter(pk=root.pk).update(children_count=width)
    return root


def test_it_requires_a_login(client):
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_it_lists_sessions_newest_first_and_searches(api, member_client):
    _session(api, title="Quarterly report")
    _session(api, title="Refund for order 42")
    page = member_client.get("/").content.decode()
    assert page.index("Refund for order 42") < page.index("Quarterly report")
    found = member_client.get("/", {"q": "quarter"}, HTTP_HX_REQUEST="true").content.decode()
    assert "Quarterly report" in found and "Refund" not in found
    assert "<html" not in found  # htmx gets only the results fragment


def test_it_searches_by_the_apis_name_for_the_search_too(api, member_client):
    _session(api, title="LangGraph thread t-1")
    _session(api, title="Refund for order 42")
    found = member_client.get("/", {"search": "langgraph"}).content.decode()
    assert "LangGraph thread t-1" in found and "Refund" not in found
    assert 'name="q" value="langgraph"' in found  # the search box shows what was searched
    both = member_client.get("/", {"q": "refund", "search": "langgraph"}).content.decode()
    assert "Refund for order 42" in both and "LangGraph thread" not in both


def test_it_finds_a_session_by_the_short_id_other_pages_show(api, member_client):
    wanted = _session(api, title="Quarterly report")
    other = _session(api, title="Refund for order 42")
    short = str(wanted.pk)[:8]
    assert not str(other.pk).startswith(short)  # two random ids: 1 in 4 billion
    for query in (short, short.upper(), str(wanted.pk)[:13]):  # dashes as the id has them
        found = member_client.get("/", {"q": query}).content.decode()
        assert "Quarterly report" in found and "Refund" not in found, query
    for query in ("abc", "zzzzzzzz", str(wanted.pk)[:8] + "x"):  # too short, not hex
        found = member_client.get("/", {"q": query})
        assert found.status_code == 200 and "Quarterly report" not in found.content.decode()


def test_it_paginates_sessions(api, member_client):
    for i in range(30):
        _session(api, title=f"Session number {i:02d}")
    first = member_client.get("/").content.decode()
    assert (
        "Page 1 of 2" in first and "Session number 29" in first and "Session number 04" not in first
    )
    second = member_client.get("/", {"page": 2}).content.decode()
    assert "Session number 00" in second


def test_it_never_shows_another_organizations_sessions(make_api, member_client):
    other = make_api(org="Globex", agent="spy")
    secret = _session(other, title="Globex merger plans")
    assert "Globex merger" not in member_client.get("/").content.decode()
    assert member_client.get(f"/sessions/{secret.pk}/").status_code == 404
    frame = frame_push(session=secret, goal="Secret", budget_total=10)
    assert member_client.get(f"/frames/{frame.pk}/").status_code == 404
    assert member_client.get(f"/frames/{frame.pk}/children/").status_code == 404


def test_the_session_page_shows_roots_and_expand_loads_children(api, member_client):
    session = _session(api)
    root = frame_push(session=session, goal="Write the report", budget_total=8000)
    child = frame_push(session=session, parent=root, goal="Collect the sources", budget_total=3000)
    frame_push(session=session, parent=child, goal="Read the archive", budget_total=500)
    page = member_client.get(f"/sessions/{session.pk}/").content.decode()
    assert "Write the report" in page
    # Issue 19: the tree opens at its first level; deeper levels load on expand.
    assert "Collect the sources" in page
    assert "Read the archive" not in page
    assert f'hx-get="/frames/{child.pk}/children/"' in page
    fragment = member_client.get(
        f"/frames/{child.pk}/children/", HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "Read the archive" in fragment and "<html" not in fragment
    assert "Active" in page and 'aria-current="step"' in page


def test_the_session_page_costs_the_same_queries_for_ten_or_a_thousand_children(api, member_client):
    small, large = _session(api, title="small"), _session(api, title="large")
    small_root, large_root = _wide_tree(small, 10), _wide_tree(large, 1000)

    def count(url):
        with CaptureQueriesContext(connection) as queries:
            assert member_client.get(url).status_code == 200
        return len(queries)

    assert count(f"/sessions/{small.pk}/") == count(f"/sessions/{large.pk}/")
    assert count(f"/frames/{small_root.pk}/children/") == count(
        f"/frames/{large_root.pk}/children/"
    )
    more = member_client.get(f"/frames/{large_root.pk}/children/").content.decode()
    assert "Show more children" in more and more.count('class="tree-node"') == 100


def test_the_frame_page_shows_the_stacked_budget(api, member_client):
    session = _session(api)
    root = frame_push(session=session, goal="Root", budget_total=8000)
    frame_reserve(frame=root, purpose="brief_context", amount=700)
    frame_push(session=session, parent=root, goal="Child", budget_total=3000)
    usage_record(session=session, frame=root, input_tokens=1500, output_tokens=500)
    page = member_client.get(f"/frames/{root.pk}/").content.decode()
    for label, tokens in (
        ("Used", 2000),
        ("Reserved", 700),
        ("Delegated to children", 3000),
        ("Available", 2300),
    ):
        assert f'{label}</th><td class="num">{tokens:,}</td>' in page
    budget = member_client.get(f"/frames/{root.pk}/", HTTP_HX_REQUEST="true").content.decode()
    assert 'id="budget"' in budget and "<html" not in budget


def test_goals_with_html_are_escaped(api, member_client):
    session = _session(api, title="<b>bold</b>")
    frame_push(session=session, goal="<script>alert(1)</script>", budget_total=10)
    page = member_client.get(f"/sessions/{session.pk}/").content.decode()
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def _changes(client, session, after):
    return client.get(f"/sessions/{session.pk}/changes/", {"after": after}, HTTP_HX_REQUEST="true")


def test_the_session_page_polls_for_what_changed(api, member_client):
    session = _session(api)
    frame_push(session=session, goal="Root", budget_total=1000)
    session.refresh_from_db()
    page = member_client.get(f"/sessions/{session.pk}/").content.decode()
    poller = f'hx-get="/sessions/{session.pk}/changes/?after={session.last_event_seq}"'
    assert poller in page and 'hx-trigger="every 3s"' in page
    response = _changes(member_client, session, session.last_event_seq)
    assert response.status_code == 204  # nothing happened: nothing to swap


def test_changes_append_new_frames_reshape_leaves_and_update_the_rest(api, member_client):
    session = _session(api)
    parent = frame_push(session=session, goal="Parent", budget_total=8000)
    frame_push(session=session, parent=parent, goal="Older child", budget_total=100)
    leaf = frame_push(session=session, goal="Leaf", budget_total=8000)
    session.refresh_from_db()
    after = session.last_event_seq

    child = frame_push(session=session, parent=parent, goal="New child", budget_total=100)
    root = frame_push(session=session, goal="New root", budget_total=500)
    frame_push(session=session, parent=leaf, goal="Leaf's first child", budget_total=100)
    usage_record(session=session, frame=root, input_tokens=10, output_tokens=5)
    response = _changes(member_client, session, after)
    assert response.status_code == 200
    html = response.content.decode()
    session.refresh_from_db()
    assert f"changes/?after={session.last_event_seq}" in html  # the poller, moved on
    # Each part also lands in the poller, so a part without a place on the page is no error.
    assert f'hx-swap-oob="beforeend:#children-{parent.pk}, #tree-updates"' in html
    assert 'hx-swap-oob="beforeend:#frame-tree, #tree-updates"' in html
    assert html.index("New child") < html.index("New root")
    assert f'hx-swap-oob="innerHTML:#frame-{leaf.pk}, #tree-updates"' in html  # now expandable
    assert f'hx-get="/frames/{leaf.pk}/children/"' in html
    assert "Leaf&#x27;s first child" not in html  # loads on expand, like any child
    assert f'hx-swap-oob="innerHTML:#frame-{parent.pk}-figures, #tree-updates"' in html
    assert f'hx-swap-oob="innerHTML:#frame-{parent.pk}, ' not in html  # stays as expanded
    assert 'id="session-lifecycle" aria-label="Session lifecycle" hx-swap-oob="true"' in html
    assert 'id="session-usage" hx-swap-oob="true"' in html
    assert re.search(r'<template>\s*<tbody id="session-events" hx-swap-oob="true">', html)
    assert html.count(f'id="frame-{child.pk}"') == 1 and "<html" not in html


def test_changes_cost_the_same_queries_for_ten_or_a_thousand_children(api, member_client):
    small, large = _session(api, title="small"), _session(api, title="large")
    small_root, large_root = _wide_tree(small, 10), _wide_tree(large, 1000)

    def count(session, root):
        session.refresh_from_db()
        after = session.last_event_seq
        frame_push(session=session, parent=root, goal="One more", budget_total=5)
        frame_push(session=session, goal="Another root", budget_total=5)
        usage_record(session=session, frame=root, input_tokens=10, output_tokens=5)
        with CaptureQueriesContext(connection) as queries:
            assert _changes(member_client, session, after).status_code == 200
        return len(queries)

    assert count(small, small_root) == count(large, large_root)


def test_an_ended_session_page_does_not_poll(api, member_client):
    session = _session(api)
    lifecycle.session_end(session=session)
    page = member_client.get(f"/sessions/{session.pk}/").content.decode()
    assert 'id="tree-updates" hidden>' in page and "The session has ended." in page


def test_a_page_behind_an_ended_session_keeps_polling_until_it_has_caught_up(
    api, member_client, monkeypatch
):
    from frames import views

    monkeypatch.setattr(views, "EVENTS_PER_POLL", 3)
    session = _session(api)
    root = frame_push(session=session, goal="Root goal", budget_total=10**6)
    for i in range(4):
        frame_push(session=session, parent=root, goal=f"Child {i}", budget_total=10)
    page = member_client.get(f"/sessions/{session.pk}/").content.decode()
    seen = int(re.search(r"changes/\?after=(\d+)", page).group(1))
    lifecycle.session_end(session=session)  # cancels five frames: more than one poll's worth
    url = f"/sessions/{session.pk}/changes/"
    first = member_client.get(url, {"after": seen}, HTTP_HX_REQUEST="true").content.decode()
    after = int(re.search(r"changes/\?after=(\d+)", first).group(1))
    assert after == seen + 3  # one poll's worth, and the poller asks again
    answers, polls = [first], 1
    while True:
        html = member_client.get(url, {"after": after}, HTTP_HX_REQUEST="true").content.decode()
        answers.append(html)
        polls += 1
        match = re.search(r"changes/\?after=(\d+)", html)
        if match is None:  # caught up: the poller comes back without hx-get
            assert 'id="tree-updates" hidden>' in html
            break
        after = int(match.group(1))
        assert polls < 10
    # Every frame the end cancelled reached the page, the root included.
    patched = " ".join(answers)
    assert polls > 2
    assert {str(f.pk) for f in Frame.objects.filter(session=session)} <= set(
        re.findall(r"#frame-([0-9a-f-]{36})-status", patched)
    )


def test_the_frame_page_polls_its_budget_and_htmx_gets_only_the_live_parts(api, member_client):
    session = _session(api)
    root = frame_push(session=session, goal="Root", budget_total=8000)
    frame_push(session=session, parent=root, goal="A child", budget_total=100)
    page = member_client.get(f"/frames/{root.pk}/").content.decode()
    poll = _poll_address(page)
    assert poll.startswith(f"/frames/{root.pk}/?children=")
    assert f'hx-get="{poll}" hx-trigger="every 3s"' in page.replace("&amp;", "&")
    usage_record(
        session=session, frame=root, input_tokens=1500, output_tokens=500, model="claude-x"
    )
    html = member_client.get(poll, HTTP_HX_REQUEST="true").content.decode()
    assert 'id="budget"' in html and 'Used</th><td class="num">2,000</td>' in html
    assert '<p id="frame-status" hx-swap-oob="true">' in html
    assert 'id="frame-calls" hx-swap-oob="true"' in html and "claude-x" in html
    # The children did not change: their card is not sent, so an opened subtree stays open.
    assert "A child" not in html and "<html" not in html


def _poll_address(page: str) -> str:
    found = re.search(r'id="budget" hx-get="([^"]+)"', page)
    assert found, "the budget card does not poll"
    return found.group(1).replace("&amp;", "&")


def test_the_frame_pages_poll_sends_its_children_again_when_one_is_pushed_or_closes(
    api, member_client
):
    session = _session(api)
    root = frame_push(session=session, goal="Root", budget_total=8000)
    first = frame_push(session=session, parent=root, goal="Read the RFC", budget_total=100)
    poll = _poll_address(member_client.get(f"/frames/{root.pk}/").content.decode())
    frame_push(session=session, parent=root, goal="Check a claim", budget_total=100)
    html = member_client.get(poll, HTTP_HX_REQUEST="true").content.decode()
    assert 'id="frame-children" hx-swap-oob="true"' in html
    assert "Read the RFC" in html and "Check a claim" in html
    poll = _poll_address(html)
    assert "frame-children" not in member_client.get(poll, HTTP_HX_REQUEST="true").content.decode()
    frame_pop(frame=first, status="failed", failure_reason="the site answered 404")
    html = member_client.get(poll, HTTP_HX_REQUEST="true").content.decode()
    assert 'id="frame-children" hx-swap-oob="true"' in html and "failed" in html


def test_the_frame_pages_poll_costs_the_same_queries_for_ten_or_a_thousand_children(
    api, member_client
):
    small, large = _session(api, title="small"), _session(api, title="large")
    small_root, large_root = _wide_tree(small, 10), _wide_tree(large, 1000)

    def count(root):
        with CaptureQueriesContext(connection) as queries:
            response = member_client.get(f"/frames/{root.pk}/", HTTP_HX_REQUEST="true")
        assert response.status_code == 200
        return len(queries)

    assert count(small_root) == count(large_root)


def test_a_closed_frame_page_stops_polling(api, member_client):
    session = _session(api)
    root = frame_push(session=session, goal="Root", budget_total=8000)
    frame_pop(frame=root, status="completed")
    page = member_client.get(f"/frames/{root.pk}/").content.decode()
    assert 'id="budget" hx-get' not in page and 'hx-trigger="every' not in page
    assert "its budget no longer changes" in page


def test_the_frame_page_lists_its_rlm_states(api, member_client):
    from frames.rlm.protocol import state_initialize

    session = _session(api)
    root = frame_push(session=session, goal="Root", budget_total=8000)
    child = frame_push(session=session, parent=root, goal="Child", budget_total=100)
    page = member_client.get(f"/frames/{child.pk}/").content.decode()
    assert "No RLM state is attached to this frame" in page
    attached = state_initialize(organization=api.organization, prompt="Count", frame=child)
    other = state_initialize(organization=api.organization, prompt="Elsewhere", session=session)
    page = member_client.get(f"/frames/{child.pk}/").content.decode()
    assert f'<a href="/rlm/{attached.state_id}/"><code>{attached.state_id}</code></a>' in page
    assert "attached to this frame" in page and other.state_id not in page
    root_page = member_client.get(f"/frames/{root.pk}/").content.decode()
    assert f"/rlm/{attached.state_id}/" in root_page and "rooted here" in root_page


def test_the_session_page_shows_what_the_calls_cost_beside_what_they_filled(api, member_client):
    session = _session(api)
    root = frame_push(session=session, goal="Root goal", budget_total=10**6)
    usage_record(
        session=session,
        frame=root,
        input_tokens=100,
        output_tokens=100,
        cache_creation_input_tokens=400,
        cache_read_input_tokens=10_000,
    )
    page = member_client.get(f"/sessions/{session.pk}/").content.decode()
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))
    # 100 + 100 + 1.25 x 400 + 0.1 x 10,000 = 1,700 effective tokens of cost,
    # while the window held 10,600 tokens.
    assert "Effective billed tokens 1,700 tokens" in text
    assert "Cache reads 10,000" in text


def test_the_session_page_loads_the_top_frames_handles_with_their_buttons(api, member_client):
    session = _session(api)
    root = frame_push(session=session, goal="Root goal", budget_total=10**6)
    top = frame_push(session=session, parent=root, goal="Read the RFC", budget_total=1000)
    handle_add(frame=top, kind="document", content="RFC 9449 section 4.")
    page = member_client.get(f"/sessions/{session.pk}/").content.decode()
    assert f'hx-get="/frames/{top.pk}/handles/"' in page
    assert f'href="/frames/{top.pk}/">the frame at the top of the stack' in page
    fragment = member_client.get(f"/frames/{top.pk}/handles/", HTTP_HX_REQUEST="true").content
    assert b"Page out" in fragment and b"document" in fragment


def test_budget_shares_read_as_plain_percentages():
    frame = Frame(budget_total=400_000, budget_used=42_490, budget_reserved=2_800)
    frame.subcall_allocation = 120_000
    widths = [s["width"] for s in frame.budget.segments()]
    assert widths == [10.62, 0.7, 30.0, 58.68]  # not 58.67999999999999


def _busy_frame(session, calls):
    """A root with ``calls`` model calls (models m-000 upwards, oldest first), popped."""
    root = frame_push(session=session, goal="Root", budget_total=10_000_000)
    for n in range(calls):
        usage_record(
            session=session, frame=root, input_tokens=10, output_tokens=1, model=f"m-{n:03}"
        )
    frame_pop(frame=root, status="completed")
    return root


def test_the_frame_page_shows_its_latest_calls_and_events_and_says_how_many(api, member_client):
    session = _session(api)
    root = _busy_frame(session, 60)
    other = frame_push(session=session, goal="Other", budget_total=100)
    usage_record(session=session, frame=other, input_tokens=1, output_tokens=1, model="x")
    events = Event.objects.filter(session=session, frame_id=root.pk).count()
    assert events > 60

    page = member_client.get(f"/frames/{root.pk}/").content.decode()
    # The events run newest first: the pop is on the page, the push a page back.
    shown = page[page.index("<h2>Events</h2>") :]
    assert "frame.popped" in shown and "frame.pushed" not in shown
    assert shown.index("frame.popped") < shown.index("usage.recorded")
    assert f"Latest 50 of {events}, newest first" in shown
    assert f'href="?before={_shown_seqs(shown)[-1]}#events"' in shown
    # So do the calls, each with its time linking to its page, and a link to all of them.
    calls = page[page.index('id="frame-calls"') : page.index("<h2>Events</h2>")]
    rows = calls[calls.index("<tbody>") :]
    assert rows.index("m-059") < rows.index("m-058") and "m-039" not in rows
    newest = Usage.objects.get(frame=root, model="m-059")
    assert f'<a href="/sessions/{session.pk}/calls/{newest.pk}/"' in rows
    assert "Latest 20 of 60, newest first" in calls
    assert f'href="/sessions/{session.pk}/calls/?frame={root.pk}"' in calls
    older = member_client.get(f"/frames/{root.pk}/", {"before": _shown_seqs(shown)[-1]})
    older = older.content.decode()[older.content.decode().index("<h2>Events</h2>") :]
    assert f"51–{events} of {events}" in older and "frame.pushed" in older
    assert "frame.popped" not in older and f'href="/frames/{root.pk}/#events"' in older

    every = member_client.get(f"/sessions/{session.pk}/calls/", {"frame": root.pk})
    listed = every.content.decode()
    assert every.status_code == 200 and "60 in all" in listed
    assert "m-000" in listed and "<td>x</td>" not in listed
    assert f"?frame={root.pk}&amp;offset=50" in listed
    later = member_client.get(f"/sessions/{session.pk}/calls/", {"frame": root.pk, "offset": 50})
    assert "m-059" in later.content.decode() and "m-000" not in later.content.decode()


def test_the_calls_page_names_the_frame_of_each_call_in_one_query_for_all(api, member_client):
    def session_with_calls(frames):
        session = _session(api)
        for n in range(frames):
            frame = frame_push(
                session=session, goal=f"Frame {n:02} " + "of a long goal " * 5, budget_total=100
            )
            usage_record(session=session, frame=frame, input_tokens=1, output_tokens=1)
        usage_record(session=session, input_tokens=1, output_tokens=1, model="loose")
        return session

    few, many = session_with_calls(2), session_with_calls(40)
    page = member_client.get(f"/sessions/{few.pk}/calls/").content.decode()
    assert "<th>Frame</th>" in page
    first = Frame.objects.get(session=few, goal__startswith="Frame 00")
    assert (
        f'<a href="/frames/{first.pk}/" title="{first.goal}">Frame 00 of a long goal of a long goal …</a>'
        in page
    )
    loose = page[page.index("<td>loose</td>") :]
    assert loose[: loose.index("</td>", len("<td>loose</td>"))].endswith("—</span>")
    # Filtered to one frame, the column would repeat that frame: it is left out.
    alone = member_client.get(f"/sessions/{few.pk}/calls/", {"frame": first.pk}).content.decode()
    assert "<th>Frame</th>" not in alone

    def count(session):
        with CaptureQueriesContext(connection) as queries:
            assert member_client.get(f"/sessions/{session.pk}/calls/").status_code == 200
        return len(queries)

    assert count(few) == count(many)


def test_the_calls_page_past_the_end_shows_the_last_page_and_a_bad_offset_the_first(
    api, member_client
):
    session = _session(api)
    _busy_frame(session, 60)
    url = f"/sessions/{session.pk}/calls/"
    past = member_client.get(url, {"offset": 5000}).content.decode()
    assert "m-059" in past and "m-050" in past and "m-049" not in past
    assert f"{url}?offset=0" in past  # the way back to earlier calls
    for offset in ("-10", "ten", "1e3", ""):
        first = member_client.get(url, {"offset": offset})
        assert first.status_code == 200
        assert "m-000" in first.content.decode() and "m-059" not in first.content.decode()
    empty = _session(api, title="No calls")
    nothing = member_client.get(f"/sessions/{empty.pk}/calls/", {"offset": 100})
    assert nothing.status_code == 200 and "No model call recorded yet." in nothing.content.decode()


def test_the_calls_of_a_frame_of_another_session_are_not_found(api, member_client):
    session, elsewhere = _session(api), _session(api, title="Elsewhere")
    frame = frame_push(session=elsewhere, goal="Root", budget_total=100)
    url = f"/sessions/{session.pk}/calls/"
    assert member_client.get(url, {"frame": frame.pk}).status_code == 404
    assert member_client.get(url, {"frame": "not-an-id"}).status_code == 404


def test_the_frame_page_costs_the_same_queries_for_a_few_calls_or_many(api, member_client):
    few, many = _busy_frame(_session(api), 3), _busy_frame(_session(api), 80)

    def count(frame, **query):
        with CaptureQueriesContext(connection) as queries:
            assert member_client.get(f"/frames/{frame.pk}/", query).status_code == 200
        return len(queries)

    page_two = _events_section(member_client.get(f"/frames/{many.pk}/").content.decode())
    assert count(few) == count(many) == count(many, before=_shown_seqs(page_two)[-1])
    # A page further back reads once more, for the anchor of the page just newer.
    deep, deeper = _busy_frame(_session(api), 130), _busy_frame(_session(api), 260)
    assert count(deep, before=_seq_of(deep, 100)) == count(deeper, before=_seq_of(deeper, 200))
    assert count(deep, before=_seq_of(deep, 100)) == count(few) + 1


def _events_section(page: str) -> str:
    return page[page.index('id="frame-events"') :]


def _shown_seqs(events: str) -> list[int]:
    """The sequence numbers of the events listed, in their order on the page."""
    return [int(seq) for seq in re.findall(r"</code> #(\d+) ", events)]


def _seq_of(frame: Frame, newer: int) -> int:
    """The sequence number of the frame's event with ``newer`` events newer than it."""
    events = Event.objects.filter(frame_id=frame.pk).order_by("-seq")
    return events.values_list("seq", flat=True)[newer]


def _page_at(member_client, address: str, **headers) -> tuple[str, list[int]]:
    """The events part of the page at ``address`` and the sequence numbers it lists."""
    response = member_client.get(address, **headers)
    assert response.status_code == 200
    events = _events_section(response.content.decode())
    return events, _shown_seqs(events)


def _link(events: str, name: str) -> str:
    found = re.search(rf'<a href="([^"]+)">[^<]*{name}', events)
    assert found, f"no {name} link"
    return found.group(1)


def test_an_older_page_of_events_keeps_its_rows_while_new_events_arrive(api, member_client):
    session = _session(api)
    root = frame_push(session=session, goal="Root", budget_total=10_000_000)
    for n in range(60):
        usage_record(
            session=session, frame=root, input_tokens=10, output_tokens=1, model=f"m-{n:03}"
        )
    url = f"/frames/{root.pk}/"
    page = member_client.get(url).content.decode()
    assert _poll_address(page).startswith(f"{url}?children=")
    first = _shown_seqs(_events_section(page))
    older = _link(_events_section(page), "Older")
    assert older == f"?before={first[-1]}#events"

    address = url + older.removesuffix("#events")
    events, rows = _page_at(member_client, address)
    total = Event.objects.filter(frame_id=root.pk).count()
    assert rows and rows[0] < first[-1] and f"51–{total} of {total}" in events
    poll = _poll_address(member_client.get(address).content.decode())
    assert poll.startswith(f"{address}&children=")

    # The agent writes on: the older page, reloaded or polled, lists the same events;
    # only where they stand moves on.
    for n in range(5):
        frame_reserve(frame=root, purpose=f"note {n}", amount=1)
    total = Event.objects.filter(frame_id=root.pk).count()
    reloaded, again = _page_at(member_client, address)
    polled, by_poll = _page_at(member_client, poll, HTTP_HX_REQUEST="true")
    assert again == by_poll == rows
    assert 'id="frame-events" hx-swap-oob="true"' in polled
    for shown in (reloaded, polled):
        assert f"{total - len(rows) + 1}–{total} of {total}" in shown
        assert "frame.reserved" not in shown and "Older" not in shown
    # The newest page shows the new events at the top, newest first.
    newest, latest = _page_at(member_client, url)
    assert f"Latest 50 of {total}, newest first" in newest and latest[0] > first[0]
    assert newest.index("frame.reserved") < newest.index("usage.recorded")

    # Newer leads to the 50 events just newer than the older page, and Older back to it.
    above = Event.objects.filter(frame_id=root.pk, seq__gt=rows[0]).order_by("seq")
    newer, shown = _page_at(member_client, url + _link(reloaded, "Newer").split("#")[0])
    assert shown == list(above.values_list("seq", flat=True)[:50])[::-1]
    assert f"{above.count() - 49}–{above.count()} of {total}" in newer
    assert url + _link(newer, "Older").split("#")[0] == address
    assert _link(newer, "Newer") == f"{url}#events"


def test_the_first_pages_poll_brings_the_new_events(api, member_client):
    session = _session(api)
    root = frame_push(session=session, goal="Open", budget_total=10_000_000)
    for _ in range(55):
        usage_record(session=session, frame=root, input_tokens=10, output_tokens=1)
    count = Event.objects.filter(frame_id=root.pk).count()
    page = member_client.get(f"/frames/{root.pk}/").content.decode()
    assert "frame.reserved" not in page
    frame_reserve(frame=root, purpose="summary", amount=5)
    poll = member_client.get(_poll_address(page), HTTP_HX_REQUEST="true").content.decode()
    assert 'id="frame-events" hx-swap-oob="true"' in poll
    events = _events_section(poll)
    assert f"Latest 50 of {count + 1}, newest first" in events
    assert events.index("frame.reserved") < events.index("usage.recorded")


def test_a_bad_events_anchor_shows_the_nearest_page(api, member_client):
    session = _session(api)
    root = _busy_frame(session, 60)
    url = f"/frames/{root.pk}/"
    seqs = list(
        Event.objects.filter(frame_id=root.pk).order_by("seq").values_list("seq", flat=True)
    )
    assert 50 < len(seqs) < 100 and seqs[0] > 0
    total = len(seqs)

    # Before the oldest event: the oldest page, its Newer link to the page above it.
    for before in (seqs[0], 1, 0, -5, "-99999999999999999999999"):
        events, shown = _page_at(member_client, f"{url}?before={before}")
        assert shown == seqs[:50][::-1] and "frame.pushed" in events, before
        assert f"{total - 49}–{total} of {total}" in events and "Older" not in events
        assert _link(events, "Newer") == f"{url}#events"
    # Past the newest event, or not a number: the newest page, as with no anchor.
    for before in (seqs[-1] + 1, 999999, "99999999999999999999999", "many", "1e3", "5.5", ""):
        events, shown = _page_at(member_client, f"{url}?before={before}")
        assert shown == seqs[-50:][::-1] and f"Latest 50 of {total}" in events, before
        assert "Newer" not in events and _link(events, "Older") == f"?before={seqs[-50]}#events"
        _page_at(member_client, f"{url}?before={before}", HTTP_HX_REQUEST="true")
    # The offsets of earlier pages are not anchors: such an address shows the newest page.
    assert _page_at(member_client, f"{url}?events=50")[1] == seqs[-50:][::-1]
    # A frame with no events of its own shows none, whatever the anchor.
    quiet = Frame.objects.create(
        session=session, organization=session.organization, goal="Quiet", budget_total=10
    )
    for before in (5, 999999, -1):
        events, shown = _page_at(member_client, f"/frames/{quiet.pk}/?before={before}")
        assert '<li class="muted">None.</li>' in events and "Newer" not in events


def test_the_sessions_list_names_lifecycle_states_as_the_session_page_does(api, member_client):
    session = session_create(organization=api.organization, agent=api.agent, title="Hot")
    Session.objects.filter(pk=session.pk).update(lifecycle_state="active_pressure")
    listed = member_client.get("/").content.decode()
    assert '<label for="filter-status">Lifecycle</label>' in listed
    assert '<option value="active_pressure">Active under pressure</option>' in listed
    assert '<span class="badge active_pressure">Active under pressure</span>' in listed
    page = member_client.get(f"/sessions/{session.pk}/").content.decode()
    assert "Active under pressure" in page and "Active Pressure" not in page + listed


def test_the_recent_events_lead_to_the_whole_log(api, member_client):
    session = session_create(organization=api.organization, agent=api.agent)
    frame_push(session=session, goal="Root", budget_total=1000)
    page = member_client.get(f"/sessions/{session.pk}/").content.decode()
    card = page[page.index("<h2>Recent events</h2>") :]
    card = card[: card.index("</section>")]
    assert f'href="/sessions/{session.pk}/at/">the whole log, step by step, in History</a>' in card
