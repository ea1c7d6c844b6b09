"""The one ranking of a context pack, without a database: its parts, and what each does."""

import numpy as np
import pytest

from contextops.relevance import (
    TermIndex,
    analyze,
    bm25,
    bm25_texts,
    query_terms,
    rank_share,
    scaled,
)
from frames.context import ranking
from frames.context.ranking import Candidate, rank


def handle(i, text, priority="medium", **kw):
    return Candidate("segments", f"h{i}", priority, text, i, position=i, group="frame", **kw)


def test_it_reads_words_as_their_stems_without_stop_words():
    assert analyze("She painted the sunrises; painting helps") == (
        "paint",
        "sunris",
        "paint",
        "help",
    )
    assert analyze("travel_policy") == ("travel", "polici")  # underscores part words


def test_bm25_weighs_rare_words_over_common_ones():
    documents = [analyze(t) for t in ("lease lease office", "office party", "office chairs")]
    scores = bm25(["leas", "offic"], documents)
    assert scores[0] > scores[1] > 0 and scores[1] == pytest.approx(scores[2])
    assert bm25([], documents).tolist() == [0, 0, 0]


def test_a_share_of_rank_gives_the_best_one_and_nothing_to_no_evidence():
    shares = rank_share(np.array([0.0, 3.0, 1.0]), k=10)
    assert shares.tolist() == [0.0, 1.0, pytest.approx(11 / 12)]


def test_a_scaled_score_is_as_far_between_the_least_and_the_best_as_the_score_is():
    # Lexical: a share of the best BM25 (0 is its own floor).
    assert scaled(np.array([0.0, 4.0, 1.0]), lowest=0.0).tolist() == [0.0, 1.0, 0.25]
    # Semantic: between the least and the most similar; no similarity at all is 0.
    assert scaled(np.array([0.2, 0.6, 0.3, -0.1])).tolist() == pytest.approx([0, 1, 0.25, 0])
    # Nothing to tell apart: each is the best; no evidence at all: nothing.
    assert scaled(np.array([0.5, 0.5])).tolist() == [1.0, 1.0]
    assert scaled(np.array([0.0, -1.0])).tolist() == [0.0, 0.0]


def test_a_weak_match_scores_by_how_weak_it_is_not_by_its_place():
    # With shares of rank, the second of two items scored nearly as high as the first
    # however far behind it was; scaled scores keep the distance.
    candidates = [
        handle(0, "The Zanzibar lease renews in March; Zanzibar office lease terms"),
        handle(1, "The lease of the van ends"),
        handle(2, "Weekly sync moved"),
    ]
    result = rank(candidates, "When does the Zanzibar lease renew?")
    assert result.scores[0].lexical == 1.0
    assert 0 < result.scores[1].lexical < 0.5
    assert result.scores[2].lexical == 0


def test_without_a_query_priority_then_recency_orders_the_candidates():
    candidates = [handle(0, "a", "high"), handle(1, "b", "low"), handle(2, "c"), handle(3, "d")]
    result = rank(candidates)
    assert [candidates[i].id for i in result.order()] == ["h0", "h3", "h2", "h1"]
    assert all(s.lexical == s.semantic == s.neighbour == 0 for s in result.scores)


def test_recency_never_lifts_an_item_over_a_higher_tier():
    many = [handle(i, "x", "background") for i in range(50)] + [handle(50, "y", "low")]
    old_low = [handle(-1, "z", "low")] + many
    order = rank(old_low).order()
    assert old_low[order[0]].priority == "low" and old_low[order[1]].priority == "low"


def test_a_query_lifts_the_relevant_item_over_higher_priority_noise():
    candidates = [
        handle(0, "The Zanzibar lease renews in March"),
        handle(1, "Weekly sync moved", "high"),
        handle(2, "Lunch order placed", "high"),
    ]
    result = rank(candidates, "When does the Zanzibar lease renew?")
    assert candidates[result.order()[0]].id == "h0"
    assert result.scores[0].lexical == 1.0


def test_a_handle_beside_a_relevant_one_shares_part_of_its_relevance():
    candidates = [
        handle(0, "Unrelated chatter about lunch"),
        handle(1, "Did you go to the pottery class?"),
        handle(2, "Yes, I loved it"),
        handle(3, "More unrelated chatter"),
    ]
    result = rank(candidates, "pottery class")
    assert result.scores[2].neighbour == pytest.approx(
        ranking.NEIGHBOUR_WEIGHT * (result.scores[1].lexical + result.scores[1].semantic)
    )
    assert result.scores[2].total > result.scores[3].total


def test_attention_boosts_and_cools_within_a_bound():
    assert ranking.attention_boost(1.0) == 0
    assert ranking.attention_boost(50) == ranking.ATTENTION_WEIGHT
    assert ranking.attention_boost(0) == -ranking.ATTENTION_WEIGHT


def test_the_semantic_part_follows_the_embeddings():
    near, far = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    candidates = [handle(0, "alpha", vector=far), handle(1, "beta", vector=near)]
    result = rank(candidates, "gamma", query_vector=np.array([0.9, 0.1]))
    assert result.scores[1].semantic == 1.0 > result.scores[0].semantic
    assert candidates[result.order()[0]].id == "h1"


def test_an_older_near_duplicate_ranks_right_behind_the_newer_and_says_so():
    same = np.array([0.6, 0.8])
    almost = np.array([0.61, 0.79])
    candidates = [
        handle(0, "Meeting moved to Tuesday 2pm about the pottery class", vector=same),
        handle(1, "Nothing to see", vector=np.array([1.0, 0.0])),
        handle(2, "Meeting moved to Thursday 3pm", vector=almost),
    ]
    result = rank(candidates, "pottery class meeting", query_vector=same)
    order = [candidates[i].id for i in result.order()]
    assert order.index("h2") < order.index("h0")  # the newer first, though it matched less
    assert result.older_than == {0: "h2"}
    assert result.scores[0].older < 0
    # The same text twice is no duplicate to mark (nothing says something else).
    twins = [handle(0, "Same", vector=same), handle(1, "Same", vector=same)]
    assert rank(twins, "same", query_vector=same).older_than == {}


def test_facts_of_different_subjects_are_no_duplicates():
    vector = np.array([0.6, 0.8])
    facts = [
        Candidate("facts", "1", "medium", "a: x", 1, vector=vector, group="subject:a"),
        Candidate("facts", "2", "medium", "b: y", 2, vector=vector, group="subject:b"),
    ]
    assert rank(facts, "x y", query_vector=vector).older_than == {}


def test_the_parts_add_up_to_the_total():
    candidates = [handle(i, f"word{i % 3} shared", attention=1.5) for i in range(10)]
    for score in rank(candidates, "word1 shared").scores:
        parts = score.as_dict()
        assert parts["total"] == pytest.approx(
            sum(v for k, v in parts.items() if k != "total"), abs=1e-3
        )


def test_bm25_over_texts_indexed_once_gives_the_scores_counted_each_time():
    """A frame's texts indexed once (``TermIndex``) score as the same texts counted anew,
    to the bit, whatever the query and however many texts follow the indexed ones."""
    texts = [
        "The invoice for the freight shipment is late.",
        "Freight rates rose; the invoice total changed twice.",
        "",
        "Lunch is at noon on Fridays.",
        "invoice invoice invoice",
    ]
    later = ["A late shipment of freight.", "Nothing about it."]
    for query in ("late freight invoice", "lunch", "unknown words", ""):
        terms = query_terms(query)
        counted = bm25(terms, [analyze(t) for t in texts + later])
        indexed = bm25_texts(terms, texts + later, TermIndex(texts))
        assert indexed.tolist() == counted.tolist()
        alone = bm25(terms, [analyze(t) for t in texts])
        assert bm25_texts(terms, texts, TermIndex(texts)).tolist() == alone.tolist()


def test_a_long_document_is_as_relevant_as_its_passage_the_query_names():
    # Scored whole, the lines about other things dilute the one line that answers: a
    # short note naming one of the words would outrank it.
    rows = [f"Row {i}: the quarterly ledger lists freight and payroll." for i in range(60)]
    rows[31] = "The Zanzibar office renews its lease with Okonkwo Properties in March."
    candidates = [
        handle(0, "\n".join(rows)),
        handle(1, "Lease paperwork for the van is in the second drawer."),
        handle(2, "Weekly sync moved"),
    ]
    result = rank(candidates, "When does the Zanzibar lease renew?")
    assert result.order()[:2] == [0, 1]
    assert result.scores[0].lexical == 1.0
    assert ranking.passages(candidates[0].text) != [candidates[0].text]


def test_passages_indexed_once_give_the_scores_counted_each_time():
    rows = "\n".join(f"Row {i}: freight invoice {i % 7} is late." for i in range(200))
    texts = [rows, "A late invoice.", rows.replace("late", "due")]
    candidates = [handle(i, text) for i, text in enumerate(texts)]
    index = ranking.PassageIndex(texts[:2])
    assert index.sizes[1] == 1 and index.sizes[0] == len(ranking.passages(rows)) > 1
    for query in ("late freight invoice", "due", "nothing here"):
        assert [s.lexical for s in rank(candidates, query, indexed=index).scores] == [
            s.lexical for s in rank(candidates, query).scores
        ]
