"""Critical content is always included whole (seed 000): never cut, never dropped."""

from frames.models import ContextPackRecord


def test_two_critical_handles_fit_whole_in_a_small_budget(api, session, frame, make_handle):
    policy = make_handle(
        frame, "policy " * 250, tokens=250, kind="system_prompt", priority="critical"
    )
    safety = make_handle(frame, "safety " * 250, tokens=250, kind="document", priority="critical")
    make_handle(frame, "background " * 900, tokens=900, priority="high")

    response = api.post(f"/sessions/{session.id}/context-pack", {"budget_tokens": 600})

    assert response.status_code == 200, response.content
    body = response.json()
    shown = {s["handle_id"]: s for s in body["segments"]}
    for handle in (policy, safety):
        assert shown[str(handle.id)]["content"] == handle.content
    dropped = {d["id"] for d in body["dropped"]}
    assert not {str(policy.id), str(safety.id)} & dropped
    assert body["token_summary"]["used"] <= 600


def test_critical_content_larger_than_the_budget_is_refused(api, session, frame, make_handle):
    for name in ("policy", "safety", "legal"):
        make_handle(frame, f"{name} " * 250, tokens=250, kind="document", priority="critical")

    response = api.post(f"/sessions/{session.id}/context-pack", {"budget_tokens": 600})

    assert response.status_code == 409
    assert response.json()["error"] == "critical_exceeds_budget"
    assert (response.json()["critical_tokens"], response.json()["budget_tokens"]) == (750, 600)
    assert not ContextPackRecord.objects.filter(session=session).exists()
