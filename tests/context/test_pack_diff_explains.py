"""GET /context-packs/{a}/diff/{b} says the true cause: each pack's format and query, the
compaction level's own drop reason, why an added item is in now, and facts the pack never
read; and the recorded packs page and read one by one."""

import uuid
from datetime import timedelta

from django.utils import timezone

from frames.models import ContextHandle, ContextPackRecord


def _pack(api, session, **body):
    body.setdefault("budget_tokens", 4000)
    response = api.post(f"/sessions/{session.id}/context-pack", body)
    assert response.status_code == 200, response.content
    return response.json()["id"]


def _diff(api, a, b):
    response = api.get(f"/context-packs/{a}/diff/{b}")
    assert response.status_code == 200, response.content
    return response.json()


def _by_id(changes):
    return {c["id"]: c for c in changes}


def test_the_diff_shows_each_packs_format_and_a_change_of_format(api, session, frame, make_handle):
    long = make_handle(frame, "word   " * 1_000 + "\n\n\n" + "end", tokens=1_600)
    a = _pack(api, session)
    session.pressure_level = "high"
    session.save(update_fields=["pressure_level"])
    b = _pack(api, session)
    body = _diff(api, a, b)
    assert (body["a"]["format"], body["b"]["format"]) == ("verbose", "ultra_dense")
    changed = _by_id(body["changed"])[str(long.id)]
    assert changed["reason"] == "pressure_format"
    assert "ultra_dense" in changed["detail"] and "verbose" in changed["detail"]
    listed = api.get(f"/sessions/{session.id}/context-packs").json()
    assert [p["format"] for p in listed] == ["ultra_dense", "verbose"]


def test_a_pack_recorded_before_formats_were_kept_has_none(api, session, frame):
    a = _pack(api, session)
    ContextPackRecord.objects.filter(pk=a).update(format="")
    body = _diff(api, a, a)
    assert body["a"]["format"] is None
    assert api.get(f"/context-packs/{a}").json()["format"] is None


def test_the_diff_shows_each_packs_query_and_replay(api, session, frame, make_handle):
    make_handle(frame, "The invoice is due Friday.", tokens=8)
    a = _pack(api, session)
    b = _pack(api, session, query="invoice")
    body = _diff(api, a, b)
    assert (body["a"]["query"], body["b"]["query"]) == ("", "invoice")
    assert body["a"]["as_of_seq"] is None and body["b"]["as_of_seq"] is None


def test_a_compaction_levels_drop_says_its_true_cause(api, session, frame, make_handle):
    make_handle(frame, "Keep this.", tokens=10, priority="critical")
    normal = make_handle(frame, "A note of medium priority.", tokens=10)
    a = _pack(api, session, budget_tokens=1000)
    b = _pack(api, session, budget_tokens=1000, min_compaction="critical")
    body = _diff(api, a, b)
    dropped = _by_id(body["dropped"])[str(normal.id)]
    # The documented reason stays over_budget; after.reason and detail tell which drop.
    assert dropped["reason"] == "over_budget"
    assert dropped["after"]["reason"] == "not_critical"
    assert dropped["detail"].startswith(
        "Left out at level critical, which keeps critical items only."
    )
    assert "fitted in no form" not in dropped["detail"]
    assert body["b"]["used"] < 1000


def test_an_added_item_says_why_it_is_in_now(api, session, frame, make_handle):
    # Three documents of which one fits: without a query the newest wins, with one the
    # invoice, written first, ranks in.
    old = timezone.now() - timedelta(days=30)
    invoice = make_handle(frame, "The invoice total is 4,200 euros. " * 20, tokens=300)
    ContextHandle.objects.filter(pk=invoice.pk).update(created_at=old, last_access_at=old)
    for i in range(2):
        make_handle(frame, f"Meeting minutes, week {i}. " * 20, tokens=300)
    a = _pack(api, session, budget_tokens=500)
    b = _pack(api, session, budget_tokens=500, query="invoice total")
    body = _diff(api, a, b)
    added = _by_id(body["added"])[str(invoice.id)]
    assert added["reason"] == "query"
    assert added["before"] is None
    assert added["after"]["reason"] == "ranked" and added["after"]["rank"] is not None
    earlier = added["earlier_drop"]
    assert earlier["reason"] == "over_budget" and earlier["rank"] > added["after"]["rank"]
    assert added["detail"].startswith(f"In now: ranked {added['after']['rank']}")
    assert "The earlier pack left it out" in added["detail"]
    assert "The query changed from '(none)' to 'invoice total'." in added["detail"]
    # Same query on both sides: no query change to name, the earlier drop's reason stays.
    c = _pack(api, session, budget_tokens=500, query="invoice total")
    assert not _diff(api, b, c)["added"]


def test_a_fact_the_pack_never_read_is_not_called_out_of_scope_wrongly(api, session, frame):
    for i in range(60):
        response = api.post(
            "/facts",
            {"source": "user", "key": f"k{i}", "subject": f"s{i}", "value": f"value {i} " * 8},
        )
        assert response.status_code == 201, response.content
    a = _pack(api, session, budget_tokens=4000)
    b = _pack(api, session, budget_tokens=500)
    record = ContextPackRecord.objects.get(pk=b)
    named = {i["id"] for i in record.included + record.dropped if i["section"] == "facts"}
    body = _diff(api, a, b)
    unread = [d for d in body["dropped"] if d["section"] == "facts" and d["id"] not in named]
    assert unread, "the smaller pack reads fewer facts than the session has"
    for change in unread:
        assert change["reason"] == "scope"
        assert "ranked below the facts it read" in change["detail"]
    # Back the other way, the facts the smaller pack never read are added: not "new".
    added = [c for c in _diff(api, b, a)["added"] if c["id"] in {u["id"] for u in unread}]
    assert added and all("ranked below the facts it read" in c["detail"] for c in added)


def test_the_pack_list_pages_with_offset(api, session, frame):
    packs = [_pack(api, session) for _ in range(3)]
    url = f"/sessions/{session.id}/context-packs"
    assert [p["id"] for p in api.get(url, {"limit": 2}).json()] == packs[::-1][:2]
    assert [p["id"] for p in api.get(url, {"limit": 2, "offset": 2}).json()] == [packs[0]]
    assert api.get(url, {"offset": 3}).json() == []
    refused = api.get(url, {"offset": -1})
    assert refused.status_code == 422 and refused.json()["error"] == "validation_error"


def test_one_recorded_pack_reads_as_the_list_shows_it(api, other_api, session, frame):
    a = _pack(api, session)
    one = api.get(f"/context-packs/{a}")
    assert one.status_code == 200
    assert one.json() == api.get(f"/sessions/{session.id}/context-packs").json()[0]
    for missing in (f"/context-packs/{uuid.uuid4()}", "/context-packs/not-a-pack"):
        response = api.get(missing)
        assert response.status_code == 404 and response.json()["error"] == "not_found"
    assert other_api.get(f"/context-packs/{a}").status_code == 404


def test_only_entries_skipped_before_ranking_lack_a_rank(api, session, frame, make_handle):
    hidden = make_handle(frame, "Not needed now.", tokens=8)
    make_handle(frame, "Background reading. " * 200, tokens=1_500, priority="low")
    a = _pack(api, session, budget_tokens=1000, exclude_handles=[str(hidden.id)])
    for entry in ContextPackRecord.objects.get(pk=a).dropped:
        skipped = entry["reason"] in ("excluded", "offline", "cold", "indexed_without_summary")
        assert (entry["rank"] is None) == skipped, entry
