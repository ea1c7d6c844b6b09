"""An interrupt's approval follows the graph: however a thread is resumed past an
interrupt, its suspension ends ``resumed`` by the saver's key, its frame closes and its
card leaves the approval inbox."""

import operator
from typing import Annotated, TypedDict

from contextops_client.langgraph import ContextopsSaver
from django.urls import reverse
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from frames.graphs.models import GraphInterrupt
from frames.models import Event, Frame, Session, Suspension, token_hash
from frames.suspensions.selectors import suspensions_pending
from tests.client.test_langgraph_differential import review_graph


def _saver(agent) -> ContextopsSaver:
    return ContextopsSaver(agent.url, agent.key, retries=1, backoff=0.01)


def _pending(agent) -> list[str]:
    return [s.reason for s in suspensions_pending(organization=agent.organization)]


def test_a_command_resume_ends_the_suspension_closes_the_frame_and_clears_the_inbox(agent):
    saver = _saver(agent)
    graph = review_graph().compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "review-1"}}
    graph.invoke({"topic": "otters"}, config)
    found = GraphInterrupt.objects.get(thread__thread_id="review-1")
    assert Frame.objects.get(pk=found.frame_id).status == "suspended"
    assert _pending(agent) == ["Publish this draft? (Draft: draft about otters)"]

    out = graph.invoke(Command(resume="yes"), config)

    assert out["published"] == "draft about otters (yes)"
    suspension = Suspension.objects.get(pk=found.suspension_id)
    assert suspension.status == "resumed"
    assert suspension.resumed_by == "agent:client-tests"
    assert suspension.resumed_at is not None
    frame = Frame.objects.get(pk=found.frame_id)
    assert frame.status == "completed"
    assert _pending(agent) == []
    assert not Frame.objects.filter(session=frame.session, status="suspended").exists()
    resumed = Event.objects.get(frame_id=frame.pk, type="frame.resumed")
    assert resumed.actor == "agent:client-tests"
    assert resumed.payload["resumed_by"] == "agent:client-tests"
    assert Session.objects.get(pk=frame.session_id).lifecycle_state == "active"
    # The inbox's token is used: approving it now is refused, nothing waits.
    assert saver.interrupts(config)[0]["status"] == "resumed"
    saver.close()


def test_a_fork_past_the_interrupt_ends_it_and_the_fork_asks_again(agent):
    saver = _saver(agent)
    graph = review_graph().compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "review-fork"}}
    graph.invoke({"topic": "owls"}, config)
    before = next(s for s in graph.get_state_history(config) if s.next == ("human_review",))
    # The interrupted checkpoint is the one whose next is the review: a fork from it is
    # the thread's new head, past the question nobody will answer there any more.
    assert _pending(agent) == ["Publish this draft? (Draft: draft about owls)"]
    fork = graph.update_state(before.config, {"draft": "v2"}, as_node="write_draft")
    assert _pending(agent) == []
    graph.invoke(None, fork)
    assert _pending(agent) == ["Publish this draft? (Draft: v2)"]
    graph.invoke(Command(resume="v2 is fine"), config)
    assert _pending(agent) == []
    assert graph.get_state(config).values["published"] == "v2 (v2 is fine)"
    saver.close()


class Answers(TypedDict, total=False):
    answers: Annotated[list[str], operator.add]


def test_interrupts_resumed_one_by_one_leave_the_card_of_the_one_still_waiting(agent):
    def ask(name: str):
        return lambda state: {"answers": [f"{name}={interrupt({'question': f'Sign off {name}?'})}"]}

    builder = StateGraph(Answers)
    builder.add_node("legal", ask("legal"))
    builder.add_node("finance", ask("finance"))
    builder.add_edge(START, "legal")
    builder.add_edge(START, "finance")
    builder.add_edge(["legal", "finance"], END)
    saver = _saver(agent)
    graph = builder.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "two-sign-offs"}}
    graph.invoke({"answers": []}, config)
    assert sorted(_pending(agent)) == ["Sign off finance?", "Sign off legal?"]
    legal = next(
        i.id for i in graph.get_state(config).interrupts if i.value["question"] == "Sign off legal?"
    )
    graph.invoke(Command(resume={legal: "ok"}), config)
    assert _pending(agent) == ["Sign off finance?"]
    last = graph.get_state(config).interrupts[0].id
    assert sorted(graph.invoke(Command(resume={last: "fine"}), config)["answers"]) == [
        "finance=fine",
        "legal=ok",
    ]
    assert _pending(agent) == []
    assert set(Suspension.objects.values_list("status", flat=True)) == {"resumed"}
    saver.close()


def test_a_node_that_asks_twice_gets_a_card_for_its_second_question(agent):
    def checks(state: Answers) -> dict:
        first = interrupt("Is the address right?")
        second = interrupt({"question": "Ship today?", "carrier": "DHL", "express": True})
        return {"answers": [first, second]}

    builder = StateGraph(Answers)
    builder.add_node("checks", checks)
    builder.add_edge(START, "checks")
    builder.add_edge("checks", END)
    saver = _saver(agent)
    graph = builder.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "two-questions"}}
    graph.invoke({"answers": []}, config)
    assert _pending(agent) == ["Is the address right?"]
    graph.invoke(Command(resume="yes"), config)
    assert _pending(agent) == ["Ship today? (Carrier: DHL; Express: yes)"]
    assert graph.invoke(Command(resume="tomorrow"), config)["answers"] == ["yes", "tomorrow"]
    assert _pending(agent) == []
    assert list(Suspension.objects.values_list("status", flat=True)) == ["resumed", "resumed"]
    saver.close()


def test_an_approval_then_the_saver_resuming_still_ends_once(agent, make_user, client):
    """The example's flow: a person approves, ``interrupt_decision`` resumes the token and
    closes the frame, then the graph resumes: nothing is ended twice."""
    saver = _saver(agent)
    graph = review_graph().compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "review-approved"}}
    graph.invoke({"topic": "seals"}, config)
    found = GraphInterrupt.objects.get(thread__thread_id="review-approved")
    grace = make_user(username="grace", approver=True)
    client.force_login(grace)
    approve = reverse("suspensions:approve", args=[found.frame_id, token_hash(found.suspension_id)])
    assert client.post(approve).status_code in (200, 302)
    assert Suspension.objects.get(pk=found.suspension_id).status == "approved"
    command = saver.interrupt_decision(config, timeout=0)
    assert command.resume["approved"] is True
    graph.invoke(command, config)
    suspension = Suspension.objects.get(pk=found.suspension_id)
    assert suspension.status == "resumed"
    assert suspension.decided_by == grace
    assert Event.objects.filter(frame_id=found.frame_id, type="frame.resumed").count() == 1
    assert Event.objects.filter(frame_id=found.frame_id, type="frame.popped").count() == 1
    saver.close()


def test_every_durability_mode_ends_the_interrupt_on_resume(agent):
    saver = _saver(agent)
    graph = review_graph().compile(checkpointer=saver)
    for durability in ("sync", "async", "exit"):
        config = {"configurable": {"thread_id": f"review-{durability}"}}
        graph.invoke({"topic": durability}, config, durability=durability)
        assert _pending(agent) == [f"Publish this draft? (Draft: draft about {durability})"]
        graph.invoke(Command(resume="ok"), config, durability=durability)
        assert _pending(agent) == [], durability
    assert not Frame.objects.filter(status="suspended").exists()
    saver.close()


def test_an_interrupt_inside_a_subgraph_is_one_card(agent):
    from tests.client.test_langgraph_differential import _with_subgraph

    saver = _saver(agent)
    graph = _with_subgraph().compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "nested-card"}}
    graph.invoke({"log": []}, config)
    assert _pending(agent) == ["check the plan?"]
    assert graph.invoke(Command(resume="checked"), config)["answers"] == ["checked"]
    assert _pending(agent) == []
    assert not Frame.objects.filter(status="suspended").exists()
    saver.close()
