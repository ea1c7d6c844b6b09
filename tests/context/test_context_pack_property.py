"""Property: over random sessions, a pack never exceeds its budget and its breakdown adds up."""

from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from frames.context import pack as context_pack
from frames.context.pack import context_pack_assemble
from frames.context.packing import CriticalExceedsBudget
from frames.models import ContextHandle, Frame, Session
from tests.hypothesis_profiles import examples

from .test_context_pack_api import stub_fact

# PostgreSQL text holds neither NUL nor lone surrogates; the API refuses them before here.
TEXT = st.characters(exclude_categories=("Cs",), exclude_characters="\x00")

HANDLE = st.fixed_dictionaries(
    {
        "priority": st.sampled_from(["critical", "high", "medium", "low", "background"]),
        "state": st.sampled_from(["cold", "loaded", "hot", "indexed", "offline"]),
        "tokens": st.integers(0, 8000),
        "summary_tokens": st.integers(0, 500),
        "content": st.text(TEXT, max_size=200),
        "include": st.booleans(),
        "exclude": st.booleans(),
    }
)


@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    budget=st.integers(500, 40_000),
    depth=st.integers(0, 4),
    handles=st.lists(HANDLE, max_size=25),
    facts=st.lists(st.tuples(st.integers(0, 3000), st.booleans()), max_size=30),
    level=st.sampled_from(["none", "light", "moderate", "aggressive", "critical"]),
    external=st.dictionaries(st.text(TEXT, max_size=10), st.text(TEXT, max_size=200), max_size=5),
)
def test_it_never_exceeds_the_budget_for_random_sessions(
    org, budget, depth, handles, facts, level, external
):
    session = Session.objects.create(
        organization=org,
        identity={"user_name": "Ada", "authority": "employee"},
        environment={"timezone": "UTC", "external_data": external},
    )
    try:
        frame = None
        for d in range(depth + 1):
            frame = Frame.objects.create(
                session=session,
                organization=org,
                parent=frame,
                depth=d,
                goal=f"goal {d}",
                budget_total=10_000,
            )
        include, exclude = [], []
        for h in handles:
            row = ContextHandle.objects.create(
                frame=frame,
                session=session,
                kind="document",
                priority=h["priority"],
                state=h["state"],
                content=h["content"],
                estimated_tokens=h["tokens"],
                summary="summary." if h["summary_tokens"] else "",
                summary_tokens=h["summary_tokens"],
            )
            if h["include"]:
                include.append(str(row.pk))
            if h["exclude"]:
                exclude.append(str(row.pk))
        stub = [stub_fact(i, f"k{i}", "v", t, is_constraint=c) for i, (t, c) in enumerate(facts)]
        with mock.patch.object(context_pack, "facts_for_context", lambda **kw: stub[: kw["limit"]]):
            try:
                pack = context_pack_assemble(
                    session=session,
                    budget_tokens=budget,
                    include_handles=include,
                    exclude_handles=exclude,
                    min_compaction=level,
                )
            except CriticalExceedsBudget as refused:
                # Critical is never cut: only a budget below the critical content refuses.
                assert refused.extra["critical_tokens"] > budget == refused.extra["budget_tokens"]
                return
        result = pack.result
        critical = {
            str(pk)
            for pk in ContextHandle.objects.filter(session=session, priority="critical")
            .exclude(state="offline")
            .exclude(pk__in=exclude)
            .values_list("pk", flat=True)
        }
        whole = {s.id for s in result.segments if s.form == "full"}
        assert critical <= whole
        assert result.used <= budget
        assert sum(result.breakdown.values()) == result.used == pack.record.used
        segment_ids = {s.id for s in result.segments}
        assert not segment_ids & (set(exclude))
        offline = {
            str(p)
            for p in ContextHandle.objects.filter(session=session, state="offline").values_list(
                "pk", flat=True
            )
        }
        assert not segment_ids & offline
    finally:
        session.delete()
