"""The audit log page shows an entry's particulars as a person reads them: a nested
mapping (what a session's deletion removed) as names and counts, never Python's repr."""

from django.test import Client

from contextops.dashboard import audit_details


def test_a_deletions_counts_read_as_names_and_numbers(api, start_session, push_ok, make_user):
    session = start_session(title="Refund for order 7")
    push_ok(session["id"], 1_000, goal="Plan the refund")
    admin = Client()
    admin.force_login(make_user(username="root", admin=True))
    assert admin.post(f"/sessions/{session['id']}/delete/").status_code == 302
    html = admin.get("/audit/").content.decode()
    assert "Deleted a session</td>" in html
    assert "frames.Event " in html and "frames.Frame 1" in html and "frames.Session 1" in html
    assert "{&#x27;" not in html and "{'" not in html and "[&#x27;" not in html


def test_nested_values_are_flattened_and_empty_ones_left_out():
    detail = {
        "title": "Refund",
        "deleted": {"frames.Event": 3, "frames.Session": 1},
        "keys": ["a", "b"],
        "nested": {"outer": {"inner": 2}, "list": [1, {"x": True}]},
        "note": "",
        "target_tokens": None,
        "changed": 0,
    }
    assert audit_details(detail) == [
        ("title", "Refund"),
        ("deleted", "frames.Event 3, frames.Session 1"),
        ("keys", "a, b"),
        ("nested", "outer (inner 2), list (1, (x True))"),
        ("changed", "0"),
    ]
    assert audit_details(["odd"]) == [("detail", "odd")]
