"""The supersession rules and constraint checks as plain functions (no database)."""

from datetime import UTC, datetime

from facts import supersession as rules
from facts.supersession import Version


def v(key, rank=3, observed=None, constraint=False, value=None):
    """A version whose value is its key unless given: different keys say different things."""
    return Version(
        key=key,
        value=key if value is None else value,
        authority_rank=rank,
        observed_at=observed,
        is_constraint=constraint,
    )


def test_it_derives_memory_type_from_the_source():
    assert rules.memory_type_for_source("policy") == "organizational"
    assert rules.memory_type_for_source("finance_system") == "organizational"
    assert rules.memory_type_for_source("crm_system") == "organizational"
    assert rules.memory_type_for_source("observation") == "capability"
    assert rules.memory_type_for_source("heuristic") == "capability"
    assert rules.memory_type_for_source("decision") == "user"
    assert rules.memory_type_for_source("") == "user"


def test_it_derives_the_subject_from_a_versioned_key():
    assert rules.subject_for_key("status_v1") == "status"
    assert rules.subject_for_key("address.v12") == "address"
    assert rules.subject_for_key("policy") == "policy"


def test_it_lets_an_equal_or_higher_authority_supersede_explicitly():
    assert rules.decide_explicit(new=v("b", 3), target=v("a", 3)).outcome == rules.SUPERSEDE
    assert rules.decide_explicit(new=v("b", 1), target=v("a", 3)).rule == "explicit"
    assert rules.decide_explicit(new=v("b", 4), target=v("a", 0)).outcome == rules.FORBIDDEN


def test_it_names_the_rule_of_an_implicit_supersession():
    assert rules.decide_implicit(new=v("b"), current=None).outcome == rules.CREATE
    assert rules.decide_implicit(new=v("b"), current=v("a")).rule == "implicit"
    assert rules.decide_implicit(new=v("b", 0), current=v("a", 3)).rule == "authority"
    jan1, jan15 = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 15, tzinfo=UTC)
    later = rules.decide_implicit(new=v("b", observed=jan15), current=v("a", observed=jan1))
    assert (later.outcome, later.rule) == (rules.SUPERSEDE, "temporal")
    earlier = rules.decide_implicit(new=v("b", observed=jan1), current=v("a", observed=jan15))
    assert (earlier.outcome, earlier.rule) == (rules.OUTDATED, "temporal")


def test_it_keeps_a_lower_authority_write_as_a_proposal():
    decision = rules.decide_implicit(new=v("offer", 4), current=v("policy", 0))
    assert decision.outcome == rules.PROPOSAL and decision.against.key == "policy"
    guarded = rules.decide_implicit(
        new=v("offer", 4), current=None, guard=v("policy", 1, constraint=True)
    )
    assert guarded.outcome == rules.PROPOSAL


def test_it_checks_each_kind_of_constraint():
    assert rules.constraint_violations({"max": 15, "unit": "%"}, "25%") == [
        "25% is above the maximum of 15%."
    ]
    assert rules.constraint_violations({"max": 15}, 15) == []
    assert rules.constraint_violations({"min": 3}, 2)
    assert rules.constraint_violations({"min": 3}, "3 people") == []
    assert rules.constraint_violations({"allowed": ["EUR", "USD"]}, "GBP")
    assert rules.constraint_violations({"allowed": ["EUR", "USD"]}, "EUR") == []
    assert rules.constraint_violations({"before": "2026-03-01"}, "2026-03-01")
    assert rules.constraint_violations({"before": "2026-03-01"}, "2026-02-28T23:00:00Z") == []
    assert rules.constraint_violations({"before": "2026-03-01"}, "soon")
    assert rules.constraint_violations({"max": 15}, "lots")


def test_it_refuses_constraints_that_cannot_be_checked():
    assert rules.constraint_errors({"max": "fifteen"})
    assert rules.constraint_errors({"allowed": "EUR"})
    assert rules.constraint_errors({"before": "next week"})
    assert rules.constraint_errors({"unit": "%"})
    assert rules.constraint_errors({"maximum": 3})
    assert rules.constraint_errors({"max": 15, "unit": "%"}) == []


def test_it_reads_a_constraint_from_short_text():
    assert rules.constraint_from_text("max 15%") == {"max": 15, "unit": "%"}
    assert rules.constraint_from_text("at least 3 people") == {"min": 3, "unit": "people"}
    assert rules.constraint_from_text("before 2026-03-01") == {"before": "2026-03-01"}
    assert rules.constraint_from_text("be nice") is None


def test_it_finds_cycles_in_a_dependency_graph():
    edges = {"c": {"b"}, "b": {"a"}}
    assert rules.has_cycle(edges, {"c"}, {"a"})
    assert not rules.has_cycle(edges, {"b"}, {"c"})


def test_it_picks_query_terms_without_stop_words():
    assert rules.query_terms("What is the current status?") == ["status"]
    assert rules.query_terms("Can we offer 25%?") == ["offer", "25"]


def test_it_changes_nothing_for_a_restatement():
    def same(key, rank=3, **kwargs):
        return v(key, rank, value="Tuesday at 2pm", **kwargs)

    unchanged = rules.decide_implicit(new=same("b"), current=same("a"))
    assert (unchanged.outcome, unchanged.against.key) == (rules.UNCHANGED, "a")
    assert rules.decide_implicit(new=same("b", 5), current=same("a", 1)).outcome == rules.UNCHANGED
    assert rules.decide_implicit(new=v("b"), current=same("a")).outcome == rules.SUPERSEDE
    as_constraint = rules.decide_implicit(new=same("b", constraint=True), current=same("a"))
    assert as_constraint.outcome == rules.SUPERSEDE
    # More weight still supersedes: a higher authority, a later observation.
    assert rules.decide_implicit(new=same("b", 1), current=same("a", 3)).rule == "authority"
    jan1, jan15 = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 15, tzinfo=UTC)
    later = rules.decide_implicit(new=same("b", observed=jan15), current=same("a", observed=jan1))
    assert (later.outcome, later.rule) == (rules.SUPERSEDE, "temporal")
    older = rules.decide_implicit(new=same("b", observed=jan1), current=same("a", observed=jan15))
    assert older.outcome == rules.UNCHANGED
    # A promotion is asked for: it is decided like any other write.
    promoted = rules.decide_implicit(new=same("b"), current=same("a"), allow_unchanged=False)
    assert (promoted.outcome, promoted.rule) == (rules.SUPERSEDE, "implicit")
    assert rules.same_statement(same("b"), same("a"))
    assert not rules.same_statement(v("b"), same("a"))
