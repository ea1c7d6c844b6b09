"""The recall benchmark's harness (tests/bench/recall), on conversations written here:
the LoCoMo file itself is never read by a test (CC BY-NC 4.0, evaluation only)."""

import json
from pathlib import Path

import numpy as np
import pytest

from tests.bench import report
from tests.bench.recall import locomo
from tests.bench.recall.baselines import (
    Baselines,
    Item,
    greedy_fill,
    recall,
    reciprocal_rank_fusion,
    wordllama_embedder,
)
from tests.bench.recall.main import Options, document, main, options, write_details, write_docs
from tests.bench.recall.run import Loaded, _write_order, baseline_room, passages, run
from tests.bench.recall.summary import MODES, Outcome, markdown, summarize, targets

# A conversation in LoCoMo's shape, made up for these tests. Sessions are listed out of
# order and the evidence and observation ids carry the malformations the real file has.
SAMPLE = {
    "sample_id": "tiny-1",
    "conversation": {
        "speaker_a": "Ana",
        "speaker_b": "Bo",
        "session_2_date_time": "10:00 am on 2 June, 2024",
        "session_2": [
            {"speaker": "Ana", "dia_id": "D2:1", "text": "We adopted a greyhound named Pixel."},
            {
                "speaker": "Bo",
                "dia_id": "D2:2",
                "text": "Congratulations!",
                "blip_caption": "a photo of a dog on a sofa",
            },
        ],
        "session_1_date_time": "9:00 am on 1 June, 2024",
        "session_1": [
            {"speaker": "Bo", "dia_id": "D1:1", "text": "I started pottery classes on Tuesdays."},
            {"speaker": "Ana", "dia_id": "D1:2", "text": "That sounds relaxing."},
        ],
    },
    "observation": {
        "session_2_observation": {
            "Ana": [
                ["Ana adopted a greyhound named Pixel.", ["D2:1", "D2:2"]],
                ["An observation of a turn that does not exist.", "D9:9"],
            ]
        },
        "session_1_observation": {"Bo": [["Bo takes pottery classes on Tuesdays.", "D1:1"]]},
    },
    "qa": [
        {"question": "What is the name of Ana's greyhound?", "evidence": ["D2:1"], "category": 4},
        {
            "question": "When does Bo go to pottery and what pet did Ana adopt?",
            "evidence": ["D1:1; D2:1", "D", "D:11:26", "D1:1"],
            "category": 1,
        },
        {"question": "Adversarial: skipped.", "evidence": ["D1:1"], "category": 5},
        {"question": "No evidence at all.", "evidence": [], "category": 3},
        {"question": "Only an unknown turn.", "evidence": ["D7:7"], "category": 2},
        {"question": "How did Ana find pottery?", "evidence": ["D1:2"], "category": 4},
    ],
}


def keyword_embedder(texts: list[str]) -> np.ndarray:
    """A stand-in embedding model: dogs on one axis, everything else on the other."""
    dogs = ("dog", "greyhound", "puppy")
    return np.array(
        [[1.0, 0.0] if any(w in t.lower() for w in dogs) else [0.0, 1.0] for t in texts]
    )


def test_it_splits_evidence_ids_and_ignores_unknown_ones():
    known = {"D1:1", "D1:2", "D2:1", "D11:26"}
    entries = ["D1:1; D2:1", "D", "D:11:26", "D1:2,D1:1  D11:26", None, 5, ["D2:1", "D3:3"]]
    assert locomo.split_ids(["D8:6; D9:17", "D1:1,D1:2 D2:1"]) == [
        "D8:6",
        "D9:17",
        "D1:1",
        "D1:2",
        "D2:1",
    ]
    assert locomo.evidence_ids(entries, known) == ("D1:1", "D2:1", "D1:2", "D11:26")
    assert locomo.evidence_ids(["D", "D:11:26", ""], known) == ()


def test_it_reads_a_sample_in_conversation_order():
    conversation = locomo.parse_sample(SAMPLE)
    assert [t.dia_id for t in conversation.turns] == ["D1:1", "D1:2", "D2:1", "D2:2"]
    assert conversation.turns[0].content == "Bo: I started pottery classes on Tuesdays."
    assert conversation.turns[3].content == (
        "Bo: Congratulations! [shares a photo: a photo of a dog on a sofa]"
    )
    assert [(o.session, o.dia_ids) for o in conversation.observations] == [
        (1, ("D1:1",)),
        (2, ("D2:1", "D2:2")),
    ]
    assert [(q.index, q.category, q.evidence) for q in conversation.questions] == [
        (0, 4, ("D2:1",)),
        (1, 1, ("D1:1", "D2:1")),
        (5, 4, ("D1:2",)),
    ]
    assert conversation.without_evidence == 2


def test_both_writes_each_session_turns_then_what_was_observed_in_it():
    conversation = locomo.parse_sample(SAMPLE)
    order = [
        getattr(piece, "dia_id", None) or piece.dia_ids
        for piece in _write_order(conversation, "both")
    ]
    assert order == ["D1:1", "D1:2", ("D1:1",), "D2:1", "D2:2", ("D2:1", "D2:2")]
    assert [p.dia_id for p in _write_order(conversation, "handles")] == [
        "D1:1",
        "D1:2",
        "D2:1",
        "D2:2",
    ]
    assert [p.dia_ids for p in _write_order(conversation, "facts")] == [("D1:1",), ("D2:1", "D2:2")]


def test_the_details_name_ids_and_figures_never_the_data_text(tmp_path):
    path = tmp_path / "details.jsonl"
    write_details(path, [_outcome("facts", 1000, 0.5, 0.25, 900)])
    [line] = path.read_text().splitlines()
    assert json.loads(line) == {
        "sample_id": "tiny-1",
        "question": 0,
        "category": 4,
        "mode": "facts",
        "budget": 1000,
        "used": 900,
        "room": 1000,
        "recall": {"pack": 0.5, "newest": 0.0, "bm25": 0.25, "hybrid": 0.25},
    }


def test_a_missing_data_file_fails_naming_locomo_path(tmp_path, capsys):
    missing = tmp_path / "nowhere.json"
    assert main({"LOCOMO_PATH": str(missing), "RECALL_WRITE": "0"}) == 2
    err = capsys.readouterr().err
    assert "LOCOMO_PATH" in err and str(missing) in err
    broken = tmp_path / "broken.json"
    broken.write_text('{"not": "a list"}')
    assert main({"LOCOMO_PATH": str(broken)}) == 2
    assert "is not LoCoMo data" in capsys.readouterr().err


def test_options_are_read_from_the_environment_and_refused_when_unusable(tmp_path, capsys):
    assert options({}) == Options()
    chosen = options(
        {
            "RECALL_CONVERSATIONS": "2",
            "RECALL_BUDGETS": "4000, 1000",
            "RECALL_MODES": "facts,handles",
            "RECALL_WRITE": "0",
        }
    )
    assert chosen == Options(2, (1000, 4000), ("handles", "facts"), False)
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps([SAMPLE]))
    for name, value in (
        ("RECALL_BUDGETS", "100"),
        ("RECALL_CONVERSATIONS", "zero"),
        ("RECALL_MODES", "turns"),
    ):
        assert main({"LOCOMO_PATH": str(data), name: value}) == 2
        assert name in capsys.readouterr().err


def test_greedy_fill_skips_what_does_not_fit_and_tries_the_next():
    items = [Item(str(i), "", tokens, ()) for i, tokens in enumerate([5, 50, 5, 3])]
    assert greedy_fill([0, 1, 2, 3], items, 12) == [0, 2]
    assert greedy_fill([1, 0], items, 55) == [1, 0]
    assert greedy_fill([0, 1], items, 0) == []


def test_recall_is_the_share_of_distinct_evidence_found():
    assert recall(["D1:1", "D2:1"], {"D1:1", "D5:5"}) == 0.5
    assert recall(["D1:1", "D1:1"], ["D1:1"]) == 1.0
    assert recall([], {"D1:1"}) == 0.0


def test_reciprocal_rank_fusion_adds_one_over_k_plus_rank():
    fused = reciprocal_rank_fusion([[2, 0], [0, 1]], k=60)
    assert fused[0] == pytest.approx(1 / 62 + 1 / 61)
    assert fused[2] == pytest.approx(1 / 61)
    assert fused[1] == pytest.approx(1 / 62)


def _distracted(planted: str) -> list[Item]:
    """The planted turn first (the oldest), then twenty turns about something else."""
    chatter = [
        Item(f"h{i}", f"Bo: the rain kept falling on day {i} of the trip", 12, (f"D3:{i}",))
        for i in range(1, 21)
    ]
    return [Item("h0", planted, 12, ("D1:1",)), *chatter]


def test_bm25_finds_a_planted_turn_that_newest_first_misses():
    baselines = Baselines(_distracted("Ana: my greyhound is named Pixel"), keyword_embedder)
    [at_one_item, at_everything] = baselines.recalls(
        "What is the name of the greyhound?", ("D1:1",), rooms=[12, 12 * 21]
    )
    assert at_one_item == {"newest": 0.0, "bm25": 1.0, "hybrid": 1.0}
    assert at_everything == {"newest": 1.0, "bm25": 1.0, "hybrid": 1.0}
    assert baselines.rankings("greyhound")["newest"][:2] == [20, 19]


def test_the_hybrid_finds_by_meaning_what_shares_no_word_with_the_question():
    baselines = Baselines(_distracted("Ana: a greyhound sleeps on the sofa"), keyword_embedder)
    [one] = baselines.recalls("which dog?", ("D1:1",), rooms=[12])
    assert one == {"newest": 0.0, "bm25": 0.0, "hybrid": 1.0}


def test_the_embedding_model_loads_from_its_wheel_and_knows_dogs_from_spreadsheets():
    embed = wordllama_embedder()
    vectors = embed(["a dog", "a puppy", "a spreadsheet"])
    assert vectors.shape[0] == 3
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]


def test_a_pack_holds_the_turns_its_segments_and_facts_stand_for():
    loaded = Loaded("both", None, "s", "f")
    loaded.add(Item("h1", "Ana: hello", 4, ("D1:1",)))
    loaded.add(Item("h2", "Bo: hi", 3, ("D1:2",)))
    loaded.add(Item("7", "obs-1: Ana greets Bo", 6, ("D1:1", "D1:3")), "obs-1")
    pack = {
        "segments": [{"handle_id": "h2", "form": "truncated"}, {"handle_id": "h9", "form": "full"}],
        "facts": [{"id": "8", "key": "obs-1", "form": "summary"}],
    }
    assert loaded.found(pack) == {"D1:1", "D1:2", "D1:3"}  # a fact found by its key alone
    assert loaded.found(pack, whole=True) == set()
    pack["segments"][0]["form"] = "light"
    assert loaded.found(pack, whole=True) == {"D1:2"}
    assert loaded.found({"segments": [], "facts": [{"id": "7", "key": "?"}]}) == {"D1:1", "D1:3"}


def test_a_document_shown_in_part_holds_the_turns_whose_whole_line_it_shows():
    loaded = Loaded("documents", None, "s", "f")
    lines = [("D1:1", "Ana: We adopted a greyhound."), ("D1:2", "Bo: Congratulations!")]
    loaded.lines["h1"] = lines
    loaded.add(Item("h1", "\n".join(line for _, line in lines), 12, ("D1:1", "D1:2")))
    excerpt = {"handle_id": "h1", "form": "excerpt", "content": "Ana: We adopted a greyhound. …"}
    assert loaded.found({"segments": [excerpt]}) == {"D1:1"}
    assert loaded.found({"segments": [excerpt]}, whole=True) == set()
    whole = {"handle_id": "h1", "form": "full", "content": "\n".join(t for _, t in lines)}
    assert loaded.found({"segments": [whole]}, whole=True) == {"D1:1", "D1:2"}
    cut = {**excerpt, "content": "… adopted a greyhound.\nBo: Congratulations!"}
    assert loaded.found({"segments": [cut]}) == {"D1:2"}  # a line shown in part is not found


def test_documents_are_cut_into_passages_of_whole_turns_for_the_passage_baseline():
    loaded = Loaded("documents", None, "s", "f")
    lines = [(f"D1:{i}", "x" * 200) for i in range(1, 6)]
    loaded.lines["h1"] = lines
    loaded.add(Item("h1", "\n".join(t for _, t in lines), 250, tuple(d for d, _ in lines)))
    cut = passages(loaded)  # 50 tokens a line: two lines a passage, the last alone
    assert [p.dia_ids for p in cut] == [("D1:1", "D1:2"), ("D1:3", "D1:4"), ("D1:5",)]
    assert all(p.tokens <= 128 for p in cut) and cut[0].text == "x" * 200 + "\n" + "x" * 200


def test_a_baseline_gets_the_room_the_issue_gives_it():
    breakdown = {"brief_context": 30, "breadcrumbs": 12, "facts": 400, "segments": 500}
    assert baseline_room("handles", 1000, breakdown) == 958
    assert baseline_room("both", 1000, breakdown) == 958
    assert baseline_room("facts", 1000, breakdown) == 400
    assert baseline_room("facts", 1000, {}) == 0


@pytest.mark.django_db
def test_a_conversation_loaded_through_the_api_is_found_whole_when_it_fits():
    from frames.models import ContextHandle

    conversation = locomo.parse_sample(SAMPLE)
    outcomes = run([conversation], budgets=[1000, 2000], embed=keyword_embedder, say=lambda _: None)
    assert len(outcomes) == 3 * 2 * len(MODES)
    for outcome in outcomes:
        # Four short turns and two observations fit any of these budgets whole; no
        # observation stands for turn D1:2, so with facts alone question 5 finds nothing.
        found = 0.0 if (outcome.mode, outcome.question) == ("facts", 5) else 1.0
        assert outcome.recall == {
            "pack": found,
            "pack_whole": found,
            "newest": found,
            "bm25": found,
            "hybrid": found,
            **({"passages": found} if outcome.mode == "documents" else {}),
            "everything": found,
        }
        assert 0 < outcome.used <= outcome.budget
        assert 0 < outcome.room <= outcome.budget
    handles = ContextHandle.objects.filter(session__title="LoCoMo tiny-1 (handles)")
    assert list(handles.order_by("created_at").values_list("kind", "priority", "content")) == [
        ("message", "medium", turn.content) for turn in conversation.turns
    ]
    assert not ContextHandle.objects.filter(session__title="LoCoMo tiny-1 (facts)").exists()
    documents = ContextHandle.objects.filter(session__title="LoCoMo tiny-1 (documents)")
    assert list(documents.order_by("created_at").values_list("kind", "content")) == [
        ("document", "\n".join(t.content for t in conversation.turns if t.session == number))
        for number in (1, 2)
    ]
    table = summarize(outcomes, budgets=[1000, 2000])
    assert table["facts"]["1000"]["questions"] == 3
    assert table["facts"]["1000"]["everything"] == pytest.approx(2 / 3)
    assert table["both"]["2000"]["categories"]["1"]["pack"] == 1.0
    assert table["handles"]["1000"]["categories"]["2"]["questions"] == 0


def _outcome(mode: str, budget: int, pack: float, hybrid: float, used: int) -> Outcome:
    return Outcome(
        "tiny-1",
        0,
        4,
        mode,
        budget,
        used,
        budget,
        {"pack": pack, "newest": 0.0, "bm25": hybrid, "hybrid": hybrid},
    )


def test_the_targets_are_checked_at_each_budget_and_never_guessed():
    outcomes = [
        _outcome("handles", 1000, 0.73, 0.70, 950),
        _outcome("handles", 2000, 0.72, 0.70, 1900),
        _outcome("facts", 1000, 0.80, 0.80, 700),
        _outcome("facts", 2000, 0.79, 0.80, 1000),
    ]
    verdicts = {
        v["target"]: v["met"]
        for v in targets(summarize(outcomes, budgets=[1000, 2000]), [1000, 2000])
    }
    assert verdicts["handles at 1,000 tokens: pack ≥ hybrid + 0.03"] is True
    assert verdicts["handles at 2,000 tokens: pack ≥ hybrid + 0.03"] is False
    assert verdicts["facts at 1,000 tokens: pack ≥ hybrid over the same facts"] is True
    assert verdicts["facts at 2,000 tokens: pack ≥ hybrid over the same facts"] is False
    both = "both at 1,000 tokens: pack ≥ the better of handles alone and facts alone"
    assert verdicts[both] is None  # "both" was not run
    assert verdicts["handles: the pack uses ≥ 90% of its budget on average"] is True
    assert verdicts["facts: the pack uses ≥ 90% of its budget on average"] is False
    outcomes += [_outcome("both", 1000, 0.80, 0.0, 990), _outcome("both", 2000, 0.78, 0.0, 1990)]
    verdicts = {
        v["target"]: v["met"]
        for v in targets(summarize(outcomes, budgets=[1000, 2000]), [1000, 2000])
    }
    assert verdicts[both] is True
    assert verdicts[both.replace("1,000", "2,000")] is False


@pytest.mark.parametrize(
    ("database", "section", "figures_file"),
    [
        ("sqlite", "benchmarks-recall-sqlite.md", "benchmarks-sqlite.json"),
        ("postgresql", "benchmarks-recall.md", "benchmarks.json"),
    ],
)
def test_the_figures_join_the_json_without_touching_the_others(
    tmp_path, monkeypatch, database, section, figures_file
):
    monkeypatch.setattr(report, "DOCS", tmp_path)
    retrieval = Path(__file__).resolve().parents[2] / "docs" / "retrieval.md"
    kept = retrieval.read_text()
    (tmp_path / "retrieval.md").write_text(kept)
    others = {"push": {"p50_ms": 1.5}, "recall": {"stale": True}}
    (tmp_path / figures_file).write_text(
        json.dumps({"commit": "0123456789ab", "database": database, "figures": others})
    )
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps([SAMPLE]))
    conversations = locomo.load(data)
    outcomes = [_outcome(mode, 1000, 0.5, 0.25, 900) for mode in MODES]
    figures = document(
        outcomes,
        conversations=conversations,
        opts=Options(budgets=(1000,)),
        database=database,
        data=data,
        wall_seconds=12.0,
        commit=report.commit(),
    )
    write_docs(figures)
    written = json.loads((tmp_path / figures_file).read_text())
    assert written["figures"]["push"] == {"p50_ms": 1.5}
    assert written["figures"]["recall"]["modes"]["handles"]["1000"]["pack_minus_hybrid"] == 0.25
    assert written["figures"]["recall"]["questions"] == 3
    assert written["figures"]["recall"]["questions_without_evidence"] == 2
    assert [v["met"] for v in written["figures"]["recall"]["targets"][:3]] == [True, True, True]
    assert written["commits"]["push"] == "0123456789ab"
    text = (tmp_path / section).read_text()
    assert "`make bench-recall`" in text and "CC BY-NC 4.0" in text
    assert f"Commit `{report.commit()}`" in text and "Measured at commit" in text
    assert "| contextops pack | 0.50 |" in text and "| pack − hybrid | +0.25 |" in text
    assert "## Retrieval recall on LoCoMo" in (tmp_path / "benchmarks.md").read_text()
    assert markdown(figures) in text
    # PostgreSQL's table is the page's, in the docs it was given; the repository's is untouched.
    page = (tmp_path / "retrieval.md").read_text()
    assert ("| contextops pack | 0.50 |" in page) == (database == "postgresql")
    assert retrieval.read_text() == kept
