"""GET /context-packs/{a}/diff/{b}: why a pack changed, one test per reason."""

from frames.models import ContextPackRecord


def _pack(api, session, **body):
    body.setdefault("budget_tokens", 4000)
    response = api.post(f"/sessions/{session.id}/context-pack", body)
    assert response.status_code == 200, response.content
    return response.json()["id"]


def _fact(api, **body):
    response = api.post("/facts", {"source": "user", **body})
    assert response.status_code == 201, response.content
    return response.json()


def _diff(api, a, b):
    response = api.get(f"/context-packs/{a}/diff/{b}")
    assert response.status_code == 200, response.content
    return response.json()


def _by_id(changes):
    return {c["id"]: c for c in changes}


def test_it_names_a_superseded_fact(api, session, frame):
    old = _fact(api, key="order_v1", subject="order", value="approved")
    a = _pack(api, session)
    new = _fact(api, key="order_v2", subject="order", value="cancelled", supersedes="order_v1")
    b = _pack(api, session)
    body = _diff(api, a, b)
    dropped = _by_id(body["dropped"])[str(old["id"])]
    assert (dropped["section"], dropped["reason"]) == ("facts", "superseded")
    assert dropped["superseded_by"] == str(new["id"])
    assert _by_id(body["added"])[str(new["id"])]["section"] == "facts"


def test_it_names_what_did_not_fit_the_budget(api, session, frame, make_handle):
    make_handle(frame, "Keep this. " * 100, tokens=400, priority="critical")
    # Too short to show as an excerpt (under twice the least one), too long for the room.
    low = make_handle(frame, "Background reading. " * 20, tokens=120, priority="low")
    a = _pack(api, session, budget_tokens=4000)
    b = _pack(api, session, budget_tokens=500)
    body = _diff(api, a, b)
    dropped = _by_id(body["dropped"])[str(low.id)]
    assert dropped["reason"] == "over_budget" and dropped["priority"] == "low"
    assert dropped["after"]["level"] == "none"  # tried in every form, fitting in none
    # The one item ranked (the critical handle and the breadcrumb are in before the ranking).
    assert dropped["after"]["rank"] == 1 and dropped["after"]["score"]["priority"] == 0.25
    assert "fitted in no form" in dropped["detail"]
    assert (body["a"]["budget"], body["b"]["budget"]) == (4000, 500)
    assert body["b"]["used"] <= 500 and body["a"]["level"] == "none"


def test_it_names_a_paged_out_handle(api, session, frame, make_handle):
    doc = make_handle(frame, "The contract says 30 days.", tokens=8)
    a = _pack(api, session)
    response = api.post(f"/handles/{doc.id}/state", {"to": "offline"})
    assert response.status_code == 200, response.content
    b = _pack(api, session)
    dropped = _by_id(_diff(api, a, b)["dropped"])[str(doc.id)]
    assert dropped["reason"] == "paged_out" and dropped["after"]["reason"] == "offline"


def test_it_names_a_handle_excluded_by_a_hint(api, session, frame, make_handle):
    doc = make_handle(frame, "Not needed now.", tokens=8)
    a = _pack(api, session)
    b = _pack(api, session, exclude_handles=[str(doc.id)])
    dropped = _by_id(_diff(api, a, b)["dropped"])[str(doc.id)]
    assert dropped["reason"] == "excluded_by_hint"
    # Back the other way the same handle is added, and the diff says why it was missing.
    added = _by_id(_diff(api, b, a)["added"])[str(doc.id)]
    assert added["reason"] == "excluded_by_hint"


def test_it_names_a_shorter_form_under_pressure(api, session, frame, make_handle):
    long = make_handle(frame, "word   " * 1_000 + "\n\n\n" + "end", tokens=1_600)
    a = _pack(api, session, budget_tokens=4000)
    b = _pack(api, session, budget_tokens=4000, min_compaction="light")
    changed = _by_id(_diff(api, a, b)["changed"])[str(long.id)]
    assert changed["reason"] == "pressure_format"
    before = {k: changed["before"][k] for k in ("form", "tokens", "level", "rank")}
    assert before == {"form": "full", "tokens": 1_600, "level": "none", "rank": 1}
    assert changed["before"]["score"]["priority"] == 0.5  # the reasons carry the score parts
    assert changed["after"]["form"] == "light" and changed["after"]["tokens"] < 1_600


def test_it_names_items_out_of_the_later_packs_scope(api, session, frame, make_frame, make_handle):
    child = make_frame(session, parent=frame, goal="Read the contract")
    note = make_handle(child, "Only the child sees this.", tokens=8)
    task_fact = _fact(
        api,
        key="child_note",
        subject="contract",
        value="30 days",
        scope="task",
        scope_id=str(child.id),
    )
    a = _pack(api, session, frame_id=str(child.id))
    b = _pack(api, session, frame_id=str(frame.id))
    body = _diff(api, a, b)
    dropped = _by_id(body["dropped"])
    assert dropped[str(note.id)]["reason"] == "scope"
    assert dropped[str(child.id)]["section"] == "breadcrumbs"
    assert dropped[str(child.id)]["reason"] == "scope"
    assert dropped[str(task_fact["id"])]["reason"] == "scope"
    assert (body["a"]["frame_id"], body["b"]["frame_id"]) == (str(child.id), str(frame.id))


def test_every_dropped_item_has_a_reason(api, session, frame, make_handle):
    for i in range(6):
        make_handle(frame, f"Document {i}. " * 300, tokens=900, priority="low")
    _fact(api, key="k", subject="s", value="v")
    a = _pack(api, session, budget_tokens=8000)
    b = _pack(api, session, budget_tokens=1200)
    body = _diff(api, a, b)
    assert body["dropped"]
    assert all(d["reason"] and d["before"] for d in body["dropped"])


def test_it_refuses_packs_of_two_sessions_and_other_organizations(
    api, other_api, session, frame, make_session, make_frame
):
    a = _pack(api, session)
    elsewhere = make_session()
    make_frame(elsewhere)
    b = _pack(api, elsewhere)
    response = api.get(f"/context-packs/{a}/diff/{b}")
    assert response.status_code == 422
    assert response.json()["error"] == "packs_of_other_sessions"
    assert other_api.get(f"/context-packs/{a}/diff/{a}").status_code == 404
    assert api.get(f"/context-packs/{a}/diff/not-a-pack").status_code == 404
    assert ContextPackRecord.objects.count() == 2


def test_a_pack_against_itself_changes_nothing(api, session, frame, make_handle):
    make_handle(frame, "Stable.", tokens=8)
    a = _pack(api, session)
    body = _diff(api, a, a)
    assert (body["added"], body["dropped"], body["changed"]) == ([], [], [])


def test_the_session_page_compares_any_two_packs(api, session, frame, member_client):
    old = _fact(api, key="order_v1", subject="order", value="approved")
    a = _pack(api, session)
    _fact(api, key="order_v2", subject="order", value="cancelled", supersedes="order_v1")
    b = _pack(api, session)
    packs = member_client.get(f"/sessions/{session.id}/context-packs/").content.decode()
    assert "Why did it change?" in packs and f'value="{a}"' in packs
    url = f"/sessions/{session.id}/context-packs/diff/"
    page = member_client.get(url, {"a": a, "b": b})
    assert page.status_code == 200
    html = page.content.decode()
    assert "Why the pack changed" in html and "<strong>superseded</strong>" in html
    assert str(old["id"]) in html
    # The new version was no candidate of the earlier pack: the page says it is new, and why.
    assert "— <strong>new</strong>: " in html and "— scope" not in html
    assert "written after the earlier pack" in html
    fragment = member_client.get(url, {"a": a, "b": b}, HTTP_HX_REQUEST="true")
    assert fragment.content.decode().lstrip().startswith('<div class="pack-diff">')
    assert member_client.get(url, {"a": a, "b": "nope"}).status_code == 404


def test_the_diff_page_is_another_organizations_404(
    other_api, make_session, make_frame, member_client
):
    elsewhere = make_session(organization=other_api.organization)
    make_frame(elsewhere)
    a = _pack(other_api, elsewhere)
    url = f"/sessions/{elsewhere.id}/context-packs/diff/"
    assert member_client.get(url, {"a": a, "b": a}).status_code == 404


def test_it_names_a_handle_shown_as_an_excerpt_for_room_or_for_another_query(
    api, session, frame, make_handle
):
    rows = [f"Row {i}: the ledger lists freight and payroll." for i in range(300)]
    rows[40], rows[260] = "Zanzibar renews in March.", "Okonkwo audits in June."
    doc = make_handle(frame, "\n".join(rows), tokens=3000)
    whole = _pack(api, session, budget_tokens=4000)
    zanzibar = _pack(api, session, budget_tokens=1000, query="When does Zanzibar renew?")
    okonkwo = _pack(api, session, budget_tokens=1000, query="When does Okonkwo audit?")
    cut = _by_id(_diff(api, whole, zanzibar)["changed"])[str(doc.id)]
    assert cut["reason"] == "over_budget"
    assert (cut["before"]["form"], cut["after"]["form"]) == ("full", "excerpt")
    assert cut["detail"].startswith("Shown as an excerpt of ")
    moved = _by_id(_diff(api, zanzibar, okonkwo)["changed"])[str(doc.id)]
    assert moved["reason"] == "query" and "When does Okonkwo audit?" in moved["detail"]
    back = _by_id(_diff(api, okonkwo, whole)["changed"])[str(doc.id)]
    assert back["reason"] == "over_budget" and back["after"]["form"] == "full"


def test_an_excerpt_of_the_same_size_showing_another_passage_is_a_change(
    api, session, frame, make_handle
):
    """Two queries cut one handle to excerpts of the same size, each the passage its
    query names: the same form and tokens, but not the same text, which the diff says."""
    rows = [f"Row {i:03}: the ledger lists freight and payroll." for i in range(300)]
    rows[100], rows[200] = "Zanzibar renews in March.", "Okonkwo audits in August."
    doc = make_handle(frame, "\n".join(rows), tokens=3000)
    zanzibar = _pack(api, session, budget_tokens=1000, query="When does Zanzibar renew?")
    okonkwo = _pack(api, session, budget_tokens=1000, query="When does Okonkwo audit?")
    shown = {
        pack_id: next(
            i
            for i in ContextPackRecord.objects.get(pk=pack_id).included
            if i["section"] == "segments"
        )
        for pack_id in (zanzibar, okonkwo)
    }
    assert shown[zanzibar]["tokens"] == shown[okonkwo]["tokens"]
    assert shown[zanzibar]["passage"] != shown[okonkwo]["passage"]
    moved = _by_id(_diff(api, zanzibar, okonkwo)["changed"])[str(doc.id)]
    assert moved["reason"] == "query" and "When does Okonkwo audit?" in moved["detail"]
    assert (moved["before"]["form"], moved["after"]["form"]) == ("excerpt", "excerpt")
