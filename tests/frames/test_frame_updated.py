"""Every status a page shows is explained by an event of the frame itself."""

from frames.models import Event, Frame


def _statuses_from_own_events(frame_id: str) -> list[str]:
    """The frame's statuses as its own events state them, in order."""
    statuses = []
    for event in Event.objects.filter(frame_id=frame_id).order_by("seq"):
        if event.type == "frame.pushed":
            statuses.append("active")
        elif "status" in event.payload and event.type.startswith("frame."):
            statuses.append(event.payload["status"])
    return statuses


def test_a_parent_logs_waiting_and_active_again_as_children_come_and_go(
    api, start_session, push_ok
):
    session = start_session()
    root = push_ok(session["id"], 10_000, goal="root")
    first = push_ok(session["id"], 1_000, parent=root["id"], goal="first")
    second = push_ok(session["id"], 1_000, parent=root["id"], goal="second")
    api.post(f"/frames/{first['id']}/pop", {"status": "completed"})
    assert api.get(f"/frames/{root['id']}").json()["status"] == "waiting"
    api.post(f"/frames/{second['id']}/pop", {"status": "failed"})

    assert _statuses_from_own_events(root["id"]) == ["active", "waiting", "active"]
    updates = Event.objects.filter(frame_id=root["id"], type="frame.updated").order_by("seq")
    assert [(e.payload["from"], e.payload["status"], e.payload["reason"]) for e in updates] == [
        ("active", "waiting", "child_pushed"),
        ("waiting", "active", "children_closed"),
    ]
    assert Frame.objects.get(pk=root["id"]).status == "active"
