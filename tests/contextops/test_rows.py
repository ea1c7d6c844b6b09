"""Rows read by hand (contextops/rows.py) come back exactly as the ORM reads them, on
either database: a foreign key's UUID included, which SQLite stores as text."""

from datetime import timedelta

import pytest
from django.utils import timezone

from facts import services as fact_services
from facts.models import WorkingSetItem
from facts.selectors.working_set import working_set_for_context
from frames.models import Frame
from frames.selectors import session_top_frame
from frames.services.sessions import session_create
from frames.services.stack import frame_push

pytestmark = pytest.mark.django_db


def _fields(instance) -> dict:
    return {f.attname: getattr(instance, f.attname) for f in type(instance)._meta.concrete_fields}


def test_the_top_frame_read_by_hand_is_the_frame_the_orm_reads(api):
    session = session_create(organization=api.organization, identity={})
    root = frame_push(session=session, goal="root", budget_total=1_000)
    child = frame_push(session=session, parent=root, goal="child", budget_total=10)

    top = session_top_frame(session)

    assert top is not None and top.pk == child.pk
    assert _fields(top) == _fields(Frame.objects.get(pk=child.pk))
    assert (top.session_id, top.parent_id) == (session.pk, root.pk)  # UUIDs, not text


def test_the_working_set_read_by_hand_is_the_working_set_the_orm_reads(api):
    session = session_create(organization=api.organization, identity={})
    fact_services.working_set_put(session=session, key="plan", value={"steps": [1, 2]})
    fact_services.working_set_put(session=session, key="note", value="later")
    WorkingSetItem.objects.filter(session=session, key="note").update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )

    items = working_set_for_context(session=session)

    assert [item.key for item in items] == ["plan"]  # the expired item is not live
    assert _fields(items[0]) == _fields(WorkingSetItem.objects.get(session=session, key="plan"))
    assert items[0].session_id == session.pk
