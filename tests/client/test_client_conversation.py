"""Conversation, compaction, paging and RLM interchange through the client, on a real worker."""

import pytest
from contextops_client import Client, CompactionInProgress, IllegalTransition, NotFound

from tests.waiting import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.xdist_group("live")]


def _exchange(i):
    return [
        {"role": "user", "content": f"Question {i}: what about cipher suite {i}?"},
        {"role": "assistant", "content": [{"type": "text", "text": f"Suite {i} is fine."}]},
    ]


def test_it_appends_messages_compacts_and_reverts(ops, celery_worker):
    session = ops.session()
    with ops.frame(session, goal="Chat", budget=10_000) as frame:
        for i in range(6):
            usage = {"input_tokens": 40, "output_tokens": 5, "model": "claude-fake"}
            answer = ops.messages_append(session, _exchange(i), usage=usage)
            assert answer["turns"][-1]["user_message"].startswith(f"Question {i}")
        assert frame.refresh().budget["used"] == 6 * 45
        turns = ops.turns(session)
        assert [t["index"] for t in turns] == list(range(6))
        queued = ops.compaction_create(session, strategy="summarize_oldest", keep_turns=2)
        assert queued["status"] in {"queued", "running", "completed"}
        run = ops.compaction_wait(queued["id"], timeout=30)
        assert run["status"] == "completed" and run["items_summarized"] == 4
        assert [run["id"]] == [r["id"] for r in ops.compactions(session)]
        turns = ops.turns(session)
        assert [t["summarized"] for t in turns] == [True] * 4 + [False] * 2
        assert {t["summary_id"] for t in turns[:4]} == {run["summary_id"]}
        reverted = ops.compaction_revert(run["id"])
        assert reverted["status"] == "reverted"
        assert not any(t["summarized"] for t in ops.turns(session))
    with pytest.raises(NotFound):
        ops.compaction_get("00000000-0000-0000-0000-000000000000")


def test_it_refuses_a_second_compaction_while_one_is_queued(ops):
    session = ops.session()
    ops.messages_append(session, _exchange(0))
    first = ops.compaction_create(session)
    with pytest.raises(CompactionInProgress) as caught:
        ops.compaction_create(session)
    assert caught.value.compaction_id == first["id"]


def test_it_pages_a_handle_out_and_back_in(ops, celery_worker):
    session = ops.session()
    with ops.frame(session, goal="Read", budget=5_000) as frame:
        text = "The vendor supports TLS 1.3 from firmware 9.2 onwards. " * 20
        handle = frame.handle("tool_result", content=text, priority="low")
        queued = ops.handle_page_out(handle)
        assert queued["status"] == "queued"

        def paged_in():  # the worker summarizes and indexes it; until then it cannot come back
            try:
                return ops.handle_page_in(handle, mode="full")
            except IllegalTransition:
                return None

        page = wait_until(paged_in, what="the handle to be indexed")
        assert page["content"] == text and page["mode"] == "full"


def test_it_exports_and_imports_an_rlm_state(ops, make_agent):
    state = ops.rlm_state_create("Carry this state over")
    ops.rlm_variable_put(state["state_id"], "answer_draft", "forty-two")
    document = ops.rlm_state_export(state["state_id"])
    ops.rlm_variable_delete(state["state_id"], "answer_draft")
    assert len(ops.rlm_mutations(state["state_id"])) >= 2
    other = make_agent(org="Globex", agent="importer")
    with Client(other.url, other.key) as elsewhere:
        copy = elsewhere.rlm_state_import(document)
        assert copy["state_id"] == state["state_id"]
        assert elsewhere.rlm_variable_get(copy["state_id"], "answer_draft")["value"] == "forty-two"
    with pytest.raises(NotFound):
        ops.rlm_variable_get(state["state_id"], "answer_draft")
