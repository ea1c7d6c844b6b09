"""A compaction that fails is announced to the destinations that asked for it."""

from contextops.llm import AnthropicSummarizer
from contextops.notifications.models import Delivery
from contextops.notifications.services import destination_create
from frames.conversation.compaction import compaction_execute
from tests.conversation.test_compaction import conversation, queued  # noqa: F401 (fixture)
from tests.fakes.anthropic_server import AnthropicFakeServer, Reply


def test_a_failed_compaction_notifies_destinations_that_want_it(api, session, queued):  # noqa: F811
    destination_create(
        organization=api.organization,
        name="ops",
        kind="webhook",
        url="http://127.0.0.1:9/x",
        events=["compaction.failed"],
    )
    destination_create(
        organization=api.organization, name="approvals only", kind="email"
    )  # the default events: approvals only
    conversation(api, session, 5)
    with AnthropicFakeServer(default=Reply.status(500)) as server:
        summarizer = AnthropicSummarizer(
            api_key="k", model="claude-test", base_url=server.base_url, sleep=lambda s: None
        )
        run_id = queued()
        compaction_execute(run_id=run_id, summarizer=summarizer)
    (delivery,) = Delivery.objects.all()
    assert delivery.destination.name == "ops" and delivery.event == "compaction.failed"
    assert delivery.payload["compaction"]["id"] == str(run_id)
    assert "InternalServerError" in delivery.payload["compaction"]["error"]
