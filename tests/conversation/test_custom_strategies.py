"""A strategy registered in settings runs conversation compactions too."""

from contextops.llm import ExtractiveSummarizer
from frames.conversation.compaction import compaction_execute
from frames.conversation.models import Turn

from .test_compaction import conversation, queued  # noqa: F401  # the fixture, shared

STRATEGIES = {"tool_output_first": "tests.context.strategies.tool_output_first"}


def test_a_registered_strategy_compacts_a_conversation(api, session, queued, settings):  # noqa: F811
    settings.CONTEXTOPS_COMPACTION_STRATEGIES = STRATEGIES
    conversation(api, session, 8, errors=(1, 4, 7))
    run = compaction_execute(
        run_id=queued(strategy="tool_output_first", target_tokens=1),
        summarizer=ExtractiveSummarizer(),
    )
    assert run.status == "completed", run.error
    assert run.strategy == "tool_output_first"
    # Turns 1 and 4 failed a build; turn 7 did too but is one of the three newest, kept.
    summarized = Turn.objects.filter(session=session, summarized=True).order_by("index")
    assert [t.index for t in summarized] == [1, 4]
    assert run.items_summarized == 2


def test_a_strategy_unknown_when_the_job_runs_fails_the_run(api, session, queued, settings):  # noqa: F811
    settings.CONTEXTOPS_COMPACTION_STRATEGIES = STRATEGIES
    conversation(api, session, 5)
    run_id = queued(strategy="tool_output_first")
    settings.CONTEXTOPS_COMPACTION_STRATEGIES = {}
    run = compaction_execute(run_id=run_id, summarizer=ExtractiveSummarizer())
    assert run.status == "failed"
    assert not Turn.objects.filter(session=session, summarized=True).exists()
