"""With the real facts app: superseded, hypothetical and draft facts never reach a pack."""

import pytest

pytest.importorskip("facts.selectors", reason="the facts app's selectors are not there yet")


def _fact(api, **body):
    response = api.post("/facts", {"source": "user", **body})
    assert response.status_code == 201, response.content
    return response.json()


def test_it_packs_only_valid_facts_in_scope(api, session, frame):
    _fact(api, key="order_v1", subject="order", value="approved")
    _fact(api, key="order_v2", subject="order", value="cancelled", supersedes="order_v1")
    _fact(
        api,
        key="plan_hypo",
        subject="plan",
        value="hypothetical-plan",
        scope="hypothetical",
        scope_id="t1",
    )
    _fact(api, key="plan_draft", subject="plan", value="draft-plan", scope="draft", scope_id="t1")
    _fact(
        api,
        key="policy_discount",
        subject="discount",
        value="max 15%",
        source="policy",
        is_constraint=True,
        constraint_type="policy",
    )
    body = api.post(
        f"/sessions/{session.id}/context-pack", {"budget_tokens": 4000, "query": "order discount"}
    ).json()
    text = " ".join(f["text"] for f in body["facts"])
    keys = [f["key"] for f in body["facts"]]
    assert "cancelled" in text
    assert "approved" not in text
    assert "hypothetical-plan" not in text and "draft-plan" not in text
    assert "policy_discount" in keys
    assert keys.index("policy_discount") < keys.index("order_v2")
    assert body["token_summary"]["breakdown"]["facts"] == sum(f["tokens"] for f in body["facts"])
