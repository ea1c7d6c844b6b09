"""What the context-pack assembly reads from the facts app, and in what order."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from facts.models import WorkingSetItem
from facts.selectors.ranking import facts_for_context
from facts.selectors.working_set import working_set_for_context
from facts.services import fact_write
from tests.conftest import IS_POSTGRES


def w(org, key, value, **kw):
    kw.setdefault("authority", "employee")
    return fact_write(
        organization=org, key=key, value=value, source=kw.pop("source", "user"), **kw
    ).fact


def keys(facts):
    return [f.key for f in facts]


def test_it_ranks_facts_by_relevance_to_the_query(api, make_session):
    org = api.organization
    w(org, "invoice_terms", "Invoices are paid within 30 days")
    w(org, "lunch", "Lunch is at noon")
    w(org, "vendor", "The vendor for invoices is Initech")
    session = make_session(api)
    ranked = keys(
        facts_for_context(
            organization=org, session=session, scope_ids=[], query="invoices vendor", limit=10
        )
    )
    assert ranked[0] == "vendor" and ranked[-1] == "lunch"
    assert set(ranked) == {"invoice_terms", "lunch", "vendor"}


def test_it_puts_governing_constraints_first_even_without_matching_words(api, make_session):
    org = api.organization
    w(org, "discount_cap", "max 15%", subject="discount", is_constraint=True, source="policy")
    for i in range(5):
        w(org, f"note{i}", f"customer note {i}")
    w(org, "discount_offer", "we might offer customers 10%", subject="discount", authority="admin")
    session = make_session(api)
    ranked = keys(
        facts_for_context(
            organization=org, session=session, scope_ids=[], query="customer offer", limit=2
        )
    )
    assert ranked[0] == "discount_cap" and "discount_offer" in ranked


def test_the_governing_read_adds_a_subjects_constraints_not_its_other_facts(api, make_session):
    """A ranked fact's subject brings in the constraints that govern it, and nothing else
    of that subject the ranking left out (here a task's note of the same subject)."""
    org = api.organization
    w(org, "refund_aside", "Bob likes refunds", subject="refunds", scope="task", scope_id="t1")
    w(org, "refund_cap", "max 50", subject="refunds", is_constraint=True, source="policy")
    w(org, "refund_ask", "the customer asks about a refund today", subject="refunds")
    for i in range(3):
        w(org, f"note{i}", f"a note {i}")
    session = make_session(api)
    ranked = keys(
        facts_for_context(
            organization=org, session=session, scope_ids=["t1"], query="customer asks", limit=2
        )
    )
    assert ranked == ["refund_cap", "refund_ask"]


def test_governing_constraints_are_found_for_subjects_of_any_spelling(api, make_session):
    """Subjects are matched as one array of text: quotes, backslashes, braces, commas
    and non-ASCII letters in a subject still find its constraint, and only its own."""
    org = api.organization
    subjects = ['price "list", {EU}', "path\\to\\budget", "Zürich-quota", "NULL"]
    for i, subject in enumerate(subjects):
        w(org, f"cap{i}", "max 15%", subject=subject, is_constraint=True, source="policy")
        w(org, f"note{i}", f"customer note about item {i}", subject=subject)
    w(org, "cap_other", "max 5", subject="price list, {EU}", is_constraint=True, source="policy")
    session = make_session(api)
    ranked = keys(
        facts_for_context(
            organization=org, session=session, scope_ids=[], query="customer note", limit=4
        )
    )
    for i in range(len(subjects)):
        assert f"cap{i}" in ranked and f"note{i}" in ranked
    assert "cap_other" not in ranked


def test_it_reads_only_valid_facts_of_the_right_scopes(api, make_session):
    org = api.organization
    w(org, "a_v1", "old")
    w(org, "a_v2", "new", supersedes="a_v1")
    w(org, "task_fact", "for this task", scope="task", scope_id="frame-1")
    w(org, "other_task", "for another task", scope="task", scope_id="frame-2")
    w(org, "session_fact", "for this session", scope="session", scope_id="sess-1")
    w(org, "hypo", "what if", scope="hypothetical", scope_id="frame-1")
    w(org, "draft", "maybe", scope="draft", scope_id="frame-1")
    session = make_session(api)
    found = set(
        keys(
            facts_for_context(
                organization=org,
                session=session,
                scope_ids=["frame-1", "sess-1"],
                query="",
                limit=50,
            )
        )
    )
    assert found == {"a_v2", "task_fact", "session_fact"}


def test_it_never_reads_another_organizations_facts(api, other_api, make_session):
    w(other_api.organization, "globex_secret", "x")
    session = make_session(api)
    assert (
        facts_for_context(
            organization=api.organization, session=session, scope_ids=[], query="secret", limit=5
        )
        == []
    )


def test_it_costs_the_same_queries_however_many_facts(api, make_session):
    org = api.organization
    session = make_session(api)
    w(org, "first", "one")

    def count():
        with CaptureQueriesContext(connection) as ctx:
            facts_for_context(
                organization=org, session=session, scope_ids=[], query="one two", limit=20
            )
        return len(ctx.captured_queries)

    small = count()
    for i in range(60):
        w(
            org,
            f"more{i}",
            f"value {i}",
            subject=f"s{i}",
            is_constraint=i % 10 == 0,
            constraint={"max": i + 1},
        )
    assert count() == small


def test_it_uses_full_text_ranking_on_postgresql(api, make_session):
    org = api.organization
    w(org, "orders_policy", "All orders above 1000 need approval")
    w(org, "weather", "It is sunny")
    ranked = keys(
        facts_for_context(
            organization=org, session=make_session(api), scope_ids=[], query="order", limit=5
        )
    )
    # English stemming finds "orders" for "order" on PostgreSQL; LIKE finds the substring elsewhere.
    assert ranked[0] == "orders_policy"
    if IS_POSTGRES:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT 1 FROM pg_indexes WHERE indexname = 'fact_search_tsv' AND indexdef LIKE '%%search_tsv%%'"
            )
            assert cursor.fetchone() is not None


def test_it_orders_the_working_set_by_relevance_and_hides_expired_items(api, make_session):
    session = make_session(api)
    now = timezone.now()
    WorkingSetItem.objects.create(session=session, key="notes", value="misc", updated_at=now)
    WorkingSetItem.objects.create(
        session=session,
        key="invoice_draft",
        value="draft of invoice 7",
        updated_at=now - timedelta(minutes=5),
    )
    WorkingSetItem.objects.create(
        session=session, key="gone", value="invoice", expires_at=now - timedelta(seconds=1)
    )
    assert keys(working_set_for_context(session=session, query="invoice")) == [
        "invoice_draft",
        "notes",
    ]
    assert keys(working_set_for_context(session=session, query="")) == ["notes", "invoice_draft"]


def test_a_past_moment_is_ranked_by_the_query_with_its_governing_facts(api, make_session):
    """As of a moment, with a query: the versions current then, ranked by the query's words,
    and the constraint governing their subject first (the read joins superseded versions
    to their successors, so the ranking must name its own table, not the joined one)."""
    org = api.organization
    w(org, "cap", "max 15%", subject="discount", is_constraint=True, source="policy")
    w(org, "offer", "customers get 10% off invoices", subject="discount")
    w(org, "lunch", "Lunch is at noon")
    moment = timezone.now()
    w(org, "offer2", "customers get 12% off invoices", subject="discount", supersedes="offer")
    session = make_session(api)
    ranked = keys(
        facts_for_context(
            organization=org,
            session=session,
            scope_ids=[],
            query="invoices customers",
            limit=2,
            as_of=moment,
        )
    )
    assert ranked == ["cap", "offer"]


@pytest.mark.skipif(not IS_POSTGRES, reason="word shares come from PostgreSQL's statistics")
def test_a_word_in_half_the_facts_or_more_orders_but_does_not_select(api, make_session):
    """ "shipping" is in twelve facts of thirteen: like a stop word, it selects nothing, so
    the one fact about customs comes first, though the others say "shipping" three times
    each; they follow, newest first, before any fact that matches no word."""
    org = api.organization
    w(org, "customs", "Customs papers are filed by Ana")
    for i in range(12):
        w(org, f"shipping{i}", f"shipping shipping shipping update {i}")
    w(org, "lunch", "Lunch is at noon")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE facts_fact")  # what autovacuum does after such writes
    ranked = keys(
        facts_for_context(
            organization=org,
            session=make_session(api),
            scope_ids=[],
            query="shipping customs",
            limit=5,
        )
    )
    assert ranked == ["customs", "shipping11", "shipping10", "shipping9", "shipping8"]
    ranked = keys(
        facts_for_context(
            organization=org, session=make_session(api), scope_ids=[], query="shipping", limit=14
        )
    )
    assert ranked[:12] == [f"shipping{i}" for i in reversed(range(12))]
    assert set(ranked[12:]) == {"customs", "lunch"}
