"""The sync client against the live server: budgets, frame blocks, errors, every area of docs/api.md."""

import uuid

import pytest
from contextops_client import (
    AlreadySuperseded,
    Client,
    ContextopsError,
    Frame,
    FrameNotActive,
    InsufficientTokens,
    KeyExists,
    NotFound,
    ReadOnlyVariable,
    Session,
    SuspensionNotApproved,
    TokenUsed,
    Unauthenticated,
    ValidationError,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.xdist_group("live")]


def test_it_creates_a_session_with_an_absolute_dashboard_address(ops, agent):
    session = ops.session(
        identity={"user_name": "Ada", "authority": "employee"},
        environment={"timezone": "Europe/Paris"},
        model="claude-fake",
        title="client test",
    )
    assert isinstance(session, Session)
    assert uuid.UUID(session.id)
    assert session.dashboard_url == f"{agent.url}/sessions/{session.id}/"
    assert ops.session_get(session.id).data["title"] == "client test"
    assert session.refresh().usage_totals == {
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


def test_it_accepts_the_api_prefix_in_the_base_url(agent):
    with Client(agent.url + "/api/v1/", agent.key) as ops:
        assert ops.health() == {"status": "ok"}
        assert ops.base_url == agent.url


def test_it_runs_the_budget_propagation_example_of_seed_000(ops):
    """Root 8000: 500 + 200 reserved, a child of 3000, 2000 used by conversation → 2300."""
    session = ops.session()
    with ops.frame(session, goal="Research", budget=8000) as root:
        root.reserve("brief_context", 500)
        root.reserve("breadcrumbs", 200)
        root.usage(input_tokens=1500, output_tokens=500)
        with ops.frame(session, goal="Read the RFC", budget=3000) as child:
            assert child.parent_frame_id == root.id
            assert child.depth == 1
            assert root.refresh().available == 2300
            assert root.budget["subcall_allocation"] == 3000
            child.usage(input_tokens=2000, output_tokens=500)
            with pytest.raises(InsufficientTokens) as caught:
                child.reserve("more evidence", 600)
            assert caught.value.requested == 600
            assert caught.value.available == 500
            assert caught.value.status == 409
            assert caught.value.code == "insufficient_tokens"
        assert child.status == "completed"
        root.refresh()
        assert root.budget["used"] == 4500  # 2000 conversation + the child's 2500
        assert root.available == 8000 - 700 - 4500
    assert root.status == "completed"
    assert ops.session_get(session).usage_totals["input_tokens"] == 3500


def test_it_pops_a_frame_block_as_failed_when_it_raises_and_reraises(ops):
    session = ops.session()
    with pytest.raises(RuntimeError, match="tool broke"):
        with ops.frame(session, goal="Outer", budget=1000) as outer:
            with ops.frame(session, goal="Inner", budget=100) as inner:
                raise RuntimeError("tool broke")
    assert ops.frame_get(inner).status == "failed"
    assert ops.frame_get(outer).status == "failed"
    assert ops.frame_get(inner).failure_reason == "RuntimeError: tool broke"
    assert [f.goal for f in ops.frames(session, status="failed")] == ["Outer", "Inner"]
    assert ops.current_frame(session) is None


def test_a_popped_frame_says_why_it_failed_and_only_a_failed_one_may(ops, api):
    session = ops.session()
    frame = ops.frame_push(session, goal="Fetch the filings", budget=100)
    other = ops.frame_push(session, goal="Summarize", budget=100, parent=frame)
    with pytest.raises(ValidationError) as caught:
        other.pop("completed", failure_reason="nothing went wrong")
    assert caught.value.status == 422 and "failure_reason" in str(caught.value)
    assert ops.frame_get(other).status == "active"  # the refused pop changed nothing
    other.pop("failed", failure_reason="The registry timed out three times. " * 80)
    assert len(ops.frame_get(other).failure_reason) == 2000  # cut to what the server keeps
    too_long = api.post(
        f"/frames/{frame.id}/pop", {"status": "failed", "failure_reason": "x" * 2001}
    )
    assert too_long.status_code == 422
    assert too_long.json()["errors"][0]["loc"] == ["body", "failure_reason"]


def test_a_frame_block_records_results_as_it_works_and_keeps_them_on_pop(ops):
    session = ops.session()
    with ops.frame(session, goal="Draft the report", budget=1000) as frame:
        frame.add_results("file:draft.md")
        assert frame.result_refs == ["file:draft.md"]  # the answer updated the object
        frame.add_results({"fact": "q3_revenue"}, "file:chart.png")
    done = ops.frame_get(frame)
    assert done.status == "completed"
    assert done.result_refs == ["file:draft.md", {"fact": "q3_revenue"}, "file:chart.png"]


def test_it_nests_blocks_per_session_and_takes_an_explicit_parent(ops):
    first, second = ops.session(), ops.session()
    with ops.frame(first, goal="A", budget=1000) as a:
        with ops.frame(second, goal="B", budget=1000) as b:
            assert b.parent_frame_id is None  # another session: not a child of A
            assert ops.current_frame(first) == a
            assert ops.current_frame(second.id) == b
        with ops.frame(first, goal="A1", budget=100, parent=None) as a1:
            assert a1.parent_frame_id == a.id
    sibling = ops.frame_push(first, goal="root two", budget=10)
    child = ops.frame_push(first, goal="explicit", budget=5, parent=sibling)
    assert child.parent_frame_id == sibling.id
    assert [f.id for f in ops.frame_ancestry(child)] == [sibling.id, child.id]
    assert [f.id for f in sibling.children()] == [child.id]


def test_it_adds_handles_and_assembles_a_context_pack_of_the_frame(ops):
    session = ops.session()
    with ops.frame(session, goal="Summarize the RFC", budget=3000) as frame:
        handle = frame.handle(
            "tool_result", content="TLS 1.3 removes static RSA key exchange.", priority="high"
        )
        assert handle["estimated_tokens"] > 0
        pack = frame.context_pack(budget_tokens=6000, query="security risks")
        assert pack["token_summary"]["used"] <= 6000
        assert any(s["handle_id"] == handle["id"] for s in pack["segments"])
        assert [b["frame_id"] for b in pack["breadcrumbs"]][-1] == frame.id
        pressure = ops.pressure(session)
        assert set(pressure) >= {"level", "utilization", "recommended_actions"}
        assert ops.handle_attention(handle, 2.0)["attention_weight"] == 2.0


def test_a_pack_replays_an_earlier_moment_and_takes_valid_time(ops):
    """``as_of_seq`` and ``valid_at`` reach the API: a handle added after the event is not
    in the replay, and a moment before every fact's validity holds none of them."""
    session = ops.session()
    with ops.frame(session, goal="Plan", budget=3000) as frame:
        first = frame.handle("document", content="Venue: Lyon.")
        seq = ops.events(session)[-1]["seq"]
        later = frame.handle("document", content="Venue: Nantes.")
        ops.fact_write(key="venue", value="Lyon", source="user")
        now = frame.context_pack(budget_tokens=1000)
        replay = frame.context_pack(budget_tokens=1000, as_of_seq=seq)
        before = frame.context_pack(budget_tokens=1000, valid_at="2001-01-01T00:00:00Z")
    assert {s["handle_id"] for s in now["segments"]} >= {first["id"], later["id"]}
    assert replay["as_of_seq"] == seq
    assert [s["handle_id"] for s in replay["segments"]] == [first["id"]]
    assert "venue" in [f["key"] for f in now["facts"]]
    assert before["facts"] == []
    # The recorded packs page, read one by one, and compare.
    listed = ops.context_packs(session, limit=2)
    assert [p["id"] for p in listed] == [before["id"], replay["id"]]
    assert [p["id"] for p in ops.context_packs(session, limit=2, offset=2)] == [now["id"]]
    one = ops.context_pack_get(replay["id"])
    assert (one["id"], one["as_of_seq"], one["format"]) == (replay["id"], seq, "verbose")
    diff = ops.context_pack_diff(now["id"], replay["id"])
    assert [d["id"] for d in diff["dropped"] if d["section"] == "segments"] == [later["id"]]


def test_it_resumes_and_reads_events_in_order(ops):
    session = ops.session()
    root = ops.frame_push(session, goal="Long task", budget=500)
    child = ops.frame_push(session, goal="Step", budget=100, parent=root)
    state = session.resume()
    assert isinstance(state["current_frame"], Frame)
    assert state["current_frame"].id == child.id
    assert [f.id for f in state["frame_stack"]] == [root.id, child.id]
    events = ops.events(session)
    # The root waits while its child works: frame.updated says so (the event log alone
    # explains every status).
    assert [e["type"] for e in events if e["type"].startswith("frame.")] == [
        "frame.pushed",
        "frame.pushed",
        "frame.updated",
    ]
    assert ops.events(session, after=events[-1]["seq"]) == []


def test_it_raises_the_documented_errors(ops, agent):
    session = ops.session()
    with pytest.raises(NotFound) as caught:
        ops.frame_get(uuid.uuid4())
    assert caught.value.status == 404 and caught.value.code == "not_found"
    assert caught.value.body["error"] == "not_found"
    with pytest.raises(NotFound):
        ops.request("GET", "/no-such-path")
    with pytest.raises(ValidationError) as invalid:
        ops.frame_push(session, goal="", budget=10)
    assert invalid.value.status == 422
    assert invalid.value.errors and "loc" in invalid.value.errors[0]
    with Client(agent.url, "not-a-key", retries=0) as stranger:
        with pytest.raises(Unauthenticated) as denied:
            stranger.session_get(session)
    assert denied.value.status == 401
    assert isinstance(denied.value, ContextopsError)


def test_it_hides_another_organizations_objects(ops, make_agent):
    session = ops.session()
    other = make_agent(org="Globex", agent="intruder")
    with Client(other.url, other.key) as intruder:
        with pytest.raises(NotFound):
            intruder.session_get(session)


def test_it_writes_facts_and_raises_already_superseded_with_the_winner(ops):
    first = ops.fact_write("vendor_limit", 10, source="policy", subject="vendor_limit")
    assert first["outcome"] == "created"
    second = ops.fact_write(
        "vendor_limit_v2", 15, source="policy", subject="vendor_limit", supersedes="vendor_limit"
    )
    assert second["outcome"] == "superseded"
    assert ops.fact_current("vendor_limit")["key"] == "vendor_limit_v2"
    with pytest.raises(AlreadySuperseded) as caught:
        ops.fact_write(
            "vendor_limit_v3",
            20,
            source="policy",
            subject="vendor_limit",
            supersedes="vendor_limit",
        )
    assert caught.value.superseded_by == "vendor_limit_v2"
    lineage = ops.fact_lineage("vendor_limit")
    assert [f["key"] for f in lineage["chain"]] == ["vendor_limit", "vendor_limit_v2"]
    listed = ops.facts(subject="vendor_limit")
    assert [f["key"] for f in listed["items"]] == ["vendor_limit_v2"]
    ops.fact_write(
        "discount_cap",
        {"max": 15},
        source="policy",
        subject="discount",
        is_constraint=True,
        constraint_type="budget",
        constraint={"max": 15, "unit": "%"},
    )
    check = ops.constraints_check("discount", 20)
    assert check["allowed"] is False and check["violations"][0]["fact_key"] == "discount_cap"


def test_it_reads_facts_as_of_a_valid_time_and_settles_proposals(ops):
    ops.fact_write("refund_limit", "15%", source="policy", valid_from="2026-02-01T00:00:00Z")
    ops.fact_write("refund_limit_v2", "10%", source="policy", valid_from="2026-03-01T00:00:00Z")
    assert ops.fact_current("refund_limit", at="2026-02-10T00:00:00Z")["value"] == "15%"
    listed = ops.facts(valid_at="2026-03-05T00:00:00Z", subject="refund_limit")
    assert [f["key"] for f in listed["items"]] == ["refund_limit_v2"]
    ops.fact_write("meeting_day", "Tuesday 2pm", source="user")
    raised = ops.fact_write("sync_meeting", "Thursday 3pm", source="user")
    (proposal,) = raised["proposed_conflicts"]
    assert [c["id"] for c in ops.fact_conflicts()["items"]] == [proposal["id"]]
    assert ops.fact_conflict_decide(proposal["id"], "distinct")["status"] == "distinct"
    assert ops.fact_conflicts()["count"] == 0
    assert ops.fact_current("meeting_day")["value"] == "Tuesday 2pm"


def test_it_keeps_a_working_set_and_the_environment(ops):
    session = ops.session(environment={"timezone": "UTC"})
    ops.working_set_put(session, "draft title", "TLS notes", ttl_seconds=60)
    assert ops.working_set_get(session, "draft title")["value"] == "TLS notes"
    assert [i["key"] for i in ops.working_set(session)] == ["draft title"]
    ops.working_set_delete(session, "draft title")
    with pytest.raises(NotFound):
        ops.working_set_get(session, "draft title")
    env = ops.environment_put(session, timezone="Asia/Tokyo", external_data={"region": "apac"})
    assert env["timezone"] == "Asia/Tokyo"
    assert ops.environment_get(session)["external_data"] == {"region": "apac"}


def test_it_suspends_and_resumes_with_a_token(ops):
    session = ops.session()
    frame = ops.frame_push(session, goal="Wait for the API", budget=100)
    suspension = frame.suspend("waiting for the vendor", expires_in_seconds=600)
    assert suspension.status == "pending"
    assert suspension.approve_url.startswith("http")
    assert ops.frame_get(frame).status == "suspended"
    assert suspension.wait(timeout=0) == "pending"
    resumed = suspension.resume()
    assert resumed.status == "active"
    with pytest.raises(TokenUsed):
        suspension.resume()
    approval = frame.suspend("publish?", requires_approval=True)
    with pytest.raises(SuspensionNotApproved):
        approval.resume()
    with ops.frame(session, goal="Suspended inside a block", budget=10) as inner:
        inner.suspend("left for a person")
    assert ops.frame_get(inner).status == "suspended"  # left suspended, not popped


def test_it_drives_an_rlm_state_to_final(ops):
    session = ops.session()
    state = ops.rlm_state_create("Find the TLS risks", session=session)
    state_id = state["state_id"]
    ops.rlm_variable_put(state_id, "notes", ["static RSA removed"], type="array")
    checkpoint = ops.rlm_checkpoint_create(state_id, "after notes")
    ops.rlm_variable_put(state_id, "draft", "temp")
    ops.rlm_rollback(state_id, checkpoint["checkpoint_id"])
    with pytest.raises(NotFound):
        ops.rlm_variable_get(state_id, "draft")
    assert ops.rlm_variable_get(state_id, "notes")["value"] == ["static RSA removed"]
    ops.rlm_final(state_id, "Two risks found.")
    assert ops.rlm_completion(state_id)["complete"] is True
    with pytest.raises(ReadOnlyVariable):
        ops.rlm_final(state_id, "changed my mind")
    exported = ops.rlm_state_export(state_id)
    assert exported


def test_it_leaves_a_frame_closed_by_final_alone(ops):
    session = ops.session()
    with ops.frame(session, goal="Answer", budget=100) as frame:
        state = ops.rlm_state_create("Answer it", session=session, frame=frame)
        ops.rlm_final(state["state_id"], "42")
    assert ops.frame_get(frame).status == "completed"


def test_it_pops_and_raises_frame_not_active_the_second_time(ops):
    session = ops.session()
    frame = ops.frame_push(session, goal="Once", budget=10)
    frame.pop()
    assert frame.status == "completed"
    with pytest.raises(FrameNotActive) as caught:
        frame.pop()
    assert caught.value.frame_status == "completed"


def test_the_docs_way_to_write_a_new_version_of_a_fact_builds_one_chain(ops):
    # docs/agents.md: a key names one version; a new value takes a new key.
    ops.fact_write("vendor_tls", "1.2", source="user", subject="vendor TLS")
    with pytest.raises(KeyExists):
        ops.fact_write("vendor_tls", "1.3 only", source="user")
    ops.fact_write("vendor_tls_2", "1.3 only", source="user", subject="vendor TLS")
    ops.fact_write("vendor_tls_3", "1.3 and 1.2", source="user", supersedes="vendor_tls_2")
    assert ops.fact_current("vendor_tls")["key"] == "vendor_tls_3"
    chain = ops.fact_lineage("vendor_tls_3")["chain"]
    assert [version["key"] for version in chain][-3:] in (
        ["vendor_tls", "vendor_tls_2", "vendor_tls_3"],
        ["vendor_tls_3", "vendor_tls_2", "vendor_tls"],
    )
