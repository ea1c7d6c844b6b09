"""What tests/conftest.py changes in Django for the tests: the flush that ends each
transactional test keeps content types and permissions and empties every other table
(``_flush_keeps_schema_rows``); the live server sends without Nagle's delay
(``_live_server_sends_without_delay``)."""

import socket
import weakref

import pytest
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.core.servers.basehttp import WSGIRequestHandler, WSGIServer
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


def test_a_connection_the_live_server_accepts_sends_without_delay():
    server = WSGIServer(("127.0.0.1", 0), WSGIRequestHandler)
    try:
        with socket.create_connection(server.server_address) as client:
            accepted, _ = server.get_request()
            with accepted:
                assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
                assert not client.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    finally:
        server.server_close()
