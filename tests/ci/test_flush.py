"""The flush that ends each transactional test (tests/conftest.py ``_flush_keeps_schema_rows``)
keeps content types and permissions and empties every other table."""

import weakref

import pytest
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db.models.signals import post_migrate

from contextops.models import Organization
from frames.models import Session


def test_post_migrate_writes_only_the_rows_the_flush_keeps():
    """The flush emits no post_migrate: an app that adds a receiver, writing rows a
    test's flush would then leave missing, must be handled there first."""
    receivers = [
        r() if isinstance(r, weakref.ReferenceType) else r for _, r, _ in post_migrate.receivers
    ]
    assert sorted(f"{r.__module__}.{r.__qualname__}" for r in receivers if r) == [
        "django.contrib.auth.management.create_permissions",
        "django.contrib.contenttypes.management.create_contenttypes",
    ]


@pytest.mark.django_db(transaction=True)
def test_a_flush_empties_the_tables_and_keeps_content_types_and_permissions(api):
    api.post("/sessions", {"title": "flushed"})
    assert Session.objects.exists()
    kinds, permissions = ContentType.objects.count(), Permission.objects.count()
    call_command("flush", interactive=False, verbosity=0)
    assert not Session.objects.exists()
    assert not Organization.objects.exists()
    assert ContentType.objects.count() == kinds > 0
    assert Permission.objects.count() == permissions > 0
    assert Permission.objects.get(codename="rollback_state", content_type__app_label="rlm")
