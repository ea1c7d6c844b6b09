"""Anchor detection (seed 002 §1.B) and turn selection (§1.C): no database."""

import pytest

from frames.conversation.anchors import (
    CONFIDENCE_THRESHOLD,
    Anchor,
    AnchorPatterns,
    ToolCall,
    ToolResult,
    TurnView,
    detect_anchor,
)
from frames.conversation.selection import (
    TurnFacts,
    compaction_level,
    compression_ratio,
    quality_warning,
    select_anchor_point,
    select_priority_based,
    select_summarize_oldest,
    select_truncate_at,
    turn_priority,
)

EDIT = ToolCall("t1", "Edit", {"file_path": "src/app.py"})
TEST_RUN = ToolCall("t2", "Bash", {"command": "pytest"})
PASSED = ToolResult("t2", "Ran 12 tests: all pass")
FAILED = ToolResult("t2", "3 tests failed", is_error=True)


def test_anchor_detection_error_resolution():
    turn = TurnView(tool_calls=[EDIT, TEST_RUN], tool_results=[PASSED], previous_error=True)
    anchor = detect_anchor(turn)
    assert anchor == Anchor(
        "error-resolution", 0.9, 0.95, "Build error fixed in src/app.py and tests now pass"
    )


def test_anchor_detection_task_completion():
    turn = TurnView(
        tool_calls=[ToolCall("w", "Write", {"file_path": "a.py"}), TEST_RUN], tool_results=[PASSED]
    )
    anchor = detect_anchor(turn)
    assert (anchor.type, anchor.weight, anchor.confidence) == ("task-completion", 0.8, 0.92)
    assert "a.py" in anchor.description
    assert CONFIDENCE_THRESHOLD == 0.9


@pytest.mark.parametrize(
    "turn",
    [
        TurnView(tool_calls=[TEST_RUN], tool_results=[PASSED]),  # no file modification
        TurnView(tool_calls=[EDIT], tool_results=[ToolResult("t1", "ok")]),  # no test output
        TurnView(tool_calls=[EDIT, TEST_RUN], tool_results=[FAILED]),  # failed result
        TurnView(
            tool_calls=[EDIT, TEST_RUN], tool_results=[ToolResult("t2", "tests PASSED")]
        ),  # seed: case-sensitive
        TurnView(tool_calls=[ToolCall("r", "Read", {}), TEST_RUN], tool_results=[PASSED]),
        TurnView(),
    ],
)
def test_it_finds_no_anchor_without_the_full_pattern(turn):
    assert detect_anchor(turn) is None


def test_it_takes_test_success_from_any_result_of_the_turn():
    turn = TurnView(
        tool_calls=[EDIT, TEST_RUN], tool_results=[FAILED, ToolResult("t3", "test suite: success")]
    )
    assert detect_anchor(turn).type == "task-completion"


def test_it_uses_configured_patterns():
    patterns = AnchorPatterns(
        file_modification_tools=("apply_patch",), test_marker="spec", success_markers=("green",)
    )
    turn = TurnView(
        tool_calls=[ToolCall("p", "apply_patch", {"path": "x.rb"})],
        tool_results=[ToolResult("p", "Specs green")],
    )
    assert detect_anchor(turn, patterns).type == "task-completion"
    assert (
        detect_anchor(TurnView(tool_calls=[EDIT, TEST_RUN], tool_results=[PASSED]), patterns)
        is None
    )


def test_it_reads_patterns_from_settings(settings):
    settings.CONTEXTOPS_ANCHOR_FILE_MODIFICATION_TOOLS = ["MultiEdit"]
    settings.CONTEXTOPS_ANCHOR_SUCCESS_MARKERS = ["ok"]
    patterns = AnchorPatterns.from_settings()
    assert patterns.file_modification_tools == ("MultiEdit",)
    assert patterns.test_marker == "test"
    assert patterns.success_markers == ("ok",)


def test_turn_selection_with_anchor():
    # 10 turns, anchors at 2 and 5 (older) and 8 (recent): keep 5..9, summarize 0..4.
    selection = select_anchor_point(10, [2, 5, 8])
    assert selection.keep == [5, 6, 7, 8, 9]
    assert selection.summarize == [0, 1, 2, 3, 4]
    assert selection.preserved_anchor == 5
    assert selection.compression_estimate == 0.5


def test_turn_selection_no_anchor():
    selection = select_anchor_point(10, [8, 9])
    assert selection.keep == [7, 8, 9]
    assert selection.summarize == list(range(7))
    assert selection.preserved_anchor is None
    assert selection.compression_estimate == pytest.approx(0.7)


@pytest.mark.parametrize("total", [0, 1, 2, 3])
def test_it_keeps_everything_with_three_turns_or_fewer(total):
    selection = select_anchor_point(total, [0])
    assert selection.keep == list(range(total))
    assert selection.summarize == []
    assert selection.compression_estimate == 0.0


def test_an_anchor_at_the_first_turn_summarizes_nothing():
    assert select_anchor_point(6, [0]).summarize == []


def test_summarize_oldest_keeps_the_recent_n_or_what_fits_the_target():
    assert select_summarize_oldest([10] * 15).keep == list(range(5, 15))
    assert select_summarize_oldest([10] * 15, keep_recent=2).summarize == list(range(13))
    by_target = select_summarize_oldest([50, 40, 30, 20, 10], target_tokens=35)
    assert by_target.keep == [3, 4]
    assert select_summarize_oldest([500, 400], target_tokens=10).keep == [1]


def test_turn_priority_ranks_recent_turns_then_anchors_then_errors():
    assert turn_priority(TurnFacts(10, anchor=True, error=True), recent=True) == "critical"
    assert turn_priority(TurnFacts(10, anchor=True, error=True), recent=False) == "high"
    assert turn_priority(TurnFacts(10, error=True), recent=False) == "medium"
    assert turn_priority(TurnFacts(10), recent=False) == "low"


def test_priority_based_summarizes_the_lowest_priority_oldest_first_until_it_fits():
    # 8 turns of 100 tokens: an anchor at 2, an error at 4, the last three critical.
    turns = [TurnFacts(100, anchor=i == 2, error=i == 4) for i in range(8)]
    # 800 -> 600: the two oldest plain turns go, the third plain one (3) stays.
    selection = select_priority_based(turns, target_tokens=600)
    assert selection.summarize == [0, 1]
    assert selection.keep == [2, 3, 4, 5, 6, 7]
    assert selection.preserved_anchor == 2
    # 800 -> 400: every plain turn (0, 1, 3), then the error turn (4); the anchor stays.
    selection = select_priority_based(turns, target_tokens=400)
    assert selection.summarize == [0, 1, 3, 4]
    assert selection.keep == [2, 5, 6, 7]
    # 800 -> 100: the anchor goes last; the three recent turns stay even above the target.
    selection = select_priority_based(turns, target_tokens=100)
    assert selection.summarize == [0, 1, 2, 3, 4]
    assert selection.keep == [5, 6, 7] and selection.preserved_anchor is None


def test_priority_based_aims_at_the_quality_bar_without_a_target():
    turns = [TurnFacts(100, anchor=i == 2) for i in range(10)]
    # 40 % of 1,000 tokens: 0, 1, 3, 4, 5, 6 are summarized, the anchor and 7..9 kept.
    selection = select_priority_based(turns)
    assert selection.summarize == [0, 1, 3, 4, 5, 6]
    assert selection.keep == [2, 7, 8, 9]


def test_priority_based_summarizes_nothing_when_the_window_fits():
    turns = [TurnFacts(100) for _ in range(6)]
    assert select_priority_based(turns, target_tokens=600).summarize == []
    assert select_priority_based(turns, target_tokens=1, keep_recent=6).summarize == []
    assert select_priority_based([], target_tokens=1).keep == []


def test_truncate_at_removes_without_summarizing():
    selection = select_truncate_at(5, 2)
    assert (selection.keep, selection.summarize, selection.remove) == ([3, 4], [], [0, 1, 2])


def test_compression_ratio_validation():
    assert compression_ratio(1000, 300) == pytest.approx(0.7)
    assert quality_warning(0.7) == ""
    assert "below 60%" in quality_warning(compression_ratio(1000, 500))
    assert compression_ratio(0, 0) == 0.0


@pytest.mark.parametrize(
    "original, final, level",
    [
        (100, 100, "none"),
        (100, 80, "light"),
        (100, 50, "moderate"),
        (100, 20, "aggressive"),
        (100, 5, "critical"),
        (0, 0, "none"),
    ],
)
def test_it_names_the_compaction_level(original, final, level):
    assert compaction_level(original, final) == level
