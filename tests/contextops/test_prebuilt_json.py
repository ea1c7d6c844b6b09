"""The two large answers (context packs, lineage) are encoded by orjson: the JSON they
send must be the JSON the API's own renderer gives for the same body."""

import json
import uuid
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.test import RequestFactory

from contextops.http import _RENDERER, prebuilt_json_response

BODIES = {
    "times to the millisecond, as the renderer writes them": {
        "created_at": datetime(2026, 11, 27, 21, 45, 3, 123456, tzinfo=UTC),
        "day": datetime(2026, 1, 2, tzinfo=UTC).date(),
    },
    "ids, prices and words of any script": {
        "id": uuid.UUID("12345678-1234-5678-1234-567812345678"),
        "price": Decimal("0.000003"),
        "value": 'Zürich ✓ 東京 \u2028 "quoted" \\ back',
    },
    "numbers, nesting and keys that are not text": {
        "facts": [{"tokens": 18, "ratio": 0.25, "ok": True, "none": None}] * 3,
        "by_level": {1: ["a"], 2: []},
    },
    "an integer beyond 64 bits in a fact's value": {"value": {"n": 2**70, "m": -(2**65)}},
}


@pytest.mark.parametrize("body", BODIES.values(), ids=BODIES.keys())
def test_it_sends_the_json_the_api_renderer_gives(body):
    request = RequestFactory().get("/")
    response = prebuilt_json_response(request, body)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json; charset=utf-8"
    expected = json.loads(_RENDERER.render(request, body, response_status=200))
    assert json.loads(response.content) == expected


def test_a_pack_holding_a_huge_integer_fact_answers_it(api, start_session):
    session = start_session()
    written = api.post(
        "/facts", {"key": "ledger.total", "value": {"cents": 2**70}, "source": "user"}
    )
    assert written.status_code in (200, 201), written.content
    response = api.post(
        f"/sessions/{session['id']}/context-pack", {"budget_tokens": 2000, "query": "ledger"}
    )
    assert response.status_code == 200, response.content
    values = [f["value"] for f in response.json()["facts"]]
    assert {"cents": 2**70} in values
