"""A malformed id names nothing: it is a 404, exactly as an unknown id is."""

import uuid

import pytest

from contextops.errors import NotFound
from contextops.ids import parse_id, uuid_or_none
from frames.models import Session


def test_it_reads_a_uuid_its_text_and_a_row():
    pk = uuid.uuid4()
    assert parse_id(pk) == pk
    assert parse_id(str(pk)) == pk
    assert parse_id(pk.hex.upper()) == pk
    session = Session(id=pk)
    assert parse_id(session) == pk


@pytest.mark.parametrize(
    "value", ["not-a-uuid", "", None, 12, "0f9d1c2e-8b3a-4c5d-9e6f-7a8b9c0d1e2"]
)
def test_it_answers_not_found_for_what_is_not_an_id(value):
    assert uuid_or_none(value) is None
    with pytest.raises(NotFound) as raised:
        parse_id(value, "No such session.")
    assert raised.value.detail == "No such session."
    assert raised.value.status == 404


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("method", "path", "detail"),
    [
        ("get", "/sessions/not-a-uuid", "No such session."),
        ("get", "/frames/not-a-uuid", "No such frame."),
        ("post", "/frames/not-a-uuid/usage", "No such frame."),
        ("post", "/sessions/not-a-uuid/end", "No such session."),
        ("get", "/compactions/not-a-uuid", "No such compaction."),
        ("get", "/context-packs/not-a-uuid/diff/not-a-uuid", "No such context pack."),
    ],
)
def test_a_malformed_or_unknown_id_in_an_address_is_a_404(api, method, path, detail):
    body = {"input_tokens": 1, "output_tokens": 1} if method == "post" else None
    for address in (path, path.replace("not-a-uuid", str(uuid.uuid4()))):
        response = getattr(api, method)(address, body) if body else getattr(api, method)(address)
        assert response.status_code == 404, response.content
        assert response.json() == {"error": "not_found", "detail": detail}
