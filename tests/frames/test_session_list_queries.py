"""The sessions list reads a whole page in a fixed number of queries."""

from django.db import connection
from django.test.utils import CaptureQueriesContext

from frames.models import Frame
from frames.services.sessions import session_create
from frames.services.stack import frame_push
from frames.services.usage import usage_record


def _sessions(api, count: int) -> None:
    """``count`` sessions of ``api``'s agent: every third with a waiting root under an
    active child, every third with a suspended root only, the rest with no frame."""
    for index in range(count):
        session = session_create(
            organization=api.organization, agent=api.agent, context_window_tokens=10_000
        )
        if index % 3 == 0:
            root = frame_push(session=session, goal="root", budget_total=5_000)
            child = frame_push(session=session, parent=root, goal="child", budget_total=900)
            usage_record(session=session, frame=child, input_tokens=9_000, output_tokens=10)
        elif index % 3 == 1:
            root = frame_push(session=session, goal="root", budget_total=5_000)
            Frame.objects.filter(pk=root.pk).update(status=Frame.Status.SUSPENDED)


def _list_queries(api, limit: int) -> tuple[int, list[dict]]:
    with CaptureQueriesContext(connection) as queries:
        response = api.get("/sessions", {"limit": limit})
    assert response.status_code == 200, response.content
    return len(queries), response.json()["items"]


def test_it_lists_2_or_200_sessions_in_the_same_number_of_queries(make_api):
    few, many = make_api(org="Few"), make_api(org="Many")
    _sessions(few, 2)
    _sessions(many, 200)

    few_queries, few_items = _list_queries(few, 200)
    many_queries, many_items = _list_queries(many, 200)

    assert (len(few_items), len(many_items)) == (2, 200)
    assert few_queries == many_queries


def test_it_lists_each_session_as_its_own_page_shows_it(make_api):
    api = make_api()
    _sessions(api, 7)

    _, items = _list_queries(api, 50)

    for item in items:
        alone = api.get(f"/sessions/{item['id']}").json()
        assert (item["top_frame_id"], item["pressure"]) == (
            alone["top_frame_id"],
            alone["pressure"],
        )
    assert {item["pressure"]["level"] for item in items} == {"low", "critical"}
    assert sum(item["top_frame_id"] is not None for item in items) == 5
