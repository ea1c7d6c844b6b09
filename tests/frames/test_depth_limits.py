"""A root frame's depth limit: the default when its push names none, and the highest a
push may name (exactly at it is accepted, one over is refused)."""

from frames.budget import DEFAULT_MAX_SUBFRAME_DEPTH, MAX_SUBFRAME_DEPTH
from frames.models import Frame


def test_it_gives_a_root_the_default_limit(start_session, push_ok):
    session = start_session()
    root = push_ok(session["id"], 1000)
    assert root["budget"]["max_subframe_depth"] == DEFAULT_MAX_SUBFRAME_DEPTH == 8
    assert Frame._meta.get_field("max_subframe_depth").default == DEFAULT_MAX_SUBFRAME_DEPTH


def test_it_accepts_the_highest_limit_and_refuses_one_over(start_session, push_ok, push):
    session = start_session()
    root = push_ok(session["id"], 1000, max_subframe_depth=MAX_SUBFRAME_DEPTH)
    assert root["budget"]["max_subframe_depth"] == MAX_SUBFRAME_DEPTH == 64
    over = push(session["id"], 1000, max_subframe_depth=MAX_SUBFRAME_DEPTH + 1)
    assert over.status_code == 422, over.content
    assert [e["loc"] for e in over.json()["errors"]] == [["body", "budget", "max_subframe_depth"]]
