"""The inbox card of a LangGraph interrupt reads as words, and leaves when the graph is
resumed with ``Command(resume=...)`` without anyone deciding in the inbox."""

import pytest
from contextops_client.langgraph import ContextopsSaver
from langgraph.types import Command
from playwright.sync_api import expect

from frames.models import Frame
from tests.client.test_langgraph_differential import review_graph

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_card_asks_its_question_in_words_and_goes_when_the_graph_resumes(logged_in, agent):
    page = logged_in
    saver = ContextopsSaver(client=agent)
    graph = review_graph().compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "press-release"}}
    graph.invoke({"topic": "the spring launch"}, config)

    page.get_by_role("link", name="Approvals").click()
    card = page.locator("#pending-suspensions .suspension", has_text="press-release")
    expect(card).to_have_count(1)
    expect(card.locator(".interrupt-question")).to_have_text("Publish this draft?")
    fields = card.locator(".interrupt-fields")
    expect(fields.locator("dt")).to_have_text(["Draft"])
    expect(fields.locator("dd")).to_have_text(["draft about the spring launch"])
    expect(card).not_to_contain_text('{"')
    expect(card).not_to_contain_text("question")

    out = graph.invoke(Command(resume="ship it"), config)
    assert out["published"] == "draft about the spring launch (ship it)"
    page.reload()
    expect(
        page.locator("#pending-suspensions .suspension", has_text="press-release")
    ).to_have_count(0)
    decided = page.locator(".suspension-decided", has_text="press-release")
    expect(decided.locator(".badge")).to_have_text("resumed")
    expect(decided).to_contain_text("resumed by agent:browser-agent")
    assert not Frame.objects.filter(status="suspended").exists()
    saver.close()
