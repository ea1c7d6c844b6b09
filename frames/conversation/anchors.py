"""Anchor points in a conversation: the rules of docs/concepts.md#anchors as plain functions.

A turn is an anchor when it closes a piece of work: files were modified and a test
result says the tests pass. After a turn that ended with a failed tool result the
anchor is an error resolution (weight 0.9, confidence 0.95), otherwise a task
completion (weight 0.8, confidence 0.92). Only patterns whose confidence reaches the
0.9 threshold become anchors. No database here: the services pass plain turns in.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

CONFIDENCE_THRESHOLD = 0.9

ERROR_RESOLUTION = "error-resolution"
TASK_COMPLETION = "task-completion"

# (type, weight, confidence) of each kind of anchor.
ERROR_RESOLUTION_WEIGHT, ERROR_RESOLUTION_CONFIDENCE = 0.9, 0.95
TASK_COMPLETION_WEIGHT, TASK_COMPLETION_CONFIDENCE = 0.8, 0.92

# The defaults; settings CONTEXTOPS_ANCHOR_* override them.
DEFAULT_FILE_MODIFICATION_TOOLS = ("Edit", "Write")
DEFAULT_TEST_MARKER = "test"
DEFAULT_SUCCESS_MARKERS = ("pass", "success")
FILE_PATH_KEYS = ("file_path", "path", "notebook_path")


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    input: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolResult:
    tool_use_id: str
    output: str
    is_error: bool = False

    @property
    def success(self) -> bool:
        return not self.is_error


@dataclass(frozen=True)
class TurnView:
    """What anchor detection reads of a turn."""

    tool_calls: Sequence[ToolCall] = ()
    tool_results: Sequence[ToolResult] = ()
    previous_error: bool = False
    user_message: str = ""
    assistant_response: str = ""


@dataclass(frozen=True)
class AnchorPatterns:
    """What counts as a file modification and as a test success.

    A test success: a successful result whose output, lower-cased, contains
    ``test_marker`` and whose output (as written) contains one of ``success_markers``.
    """

    file_modification_tools: tuple[str, ...] = DEFAULT_FILE_MODIFICATION_TOOLS
    test_marker: str = DEFAULT_TEST_MARKER
    success_markers: tuple[str, ...] = DEFAULT_SUCCESS_MARKERS

    @classmethod
    def from_settings(cls) -> "AnchorPatterns":
        return cls(
            file_modification_tools=tuple(
                getattr(
                    settings,
                    "CONTEXTOPS_ANCHOR_FILE_MODIFICATION_TOOLS",
                    DEFAULT_FILE_MODIFICATION_TOOLS,
                )
            ),
            test_marker=getattr(settings, "CONTEXTOPS_ANCHOR_TEST_MARKER", DEFAULT_TEST_MARKER),
            success_markers=tuple(
                getattr(settings, "CONTEXTOPS_ANCHOR_SUCCESS_MARKERS", DEFAULT_SUCCESS_MARKERS)
            ),
        )


@dataclass(frozen=True)
class Anchor:
    type: str
    weight: float
    confidence: float
    description: str = ""


def has_test_success(results: Iterable[ToolResult], patterns: AnchorPatterns) -> bool:
    marker = patterns.test_marker.lower()
    return any(
        r.success
        and marker in r.output.lower()
        and any(m in r.output for m in patterns.success_markers)
        for r in results
    )


def modified_files(calls: Iterable[ToolCall], patterns: AnchorPatterns) -> list[str]:
    """Paths named by the file-modifying calls, in order, without repeats ("" when unnamed)."""
    files: list[str] = []
    for call in calls:
        if call.name not in patterns.file_modification_tools:
            continue
        path = next(
            (
                str(call.input[k])
                for k in FILE_PATH_KEYS
                if isinstance(call.input, dict) and call.input.get(k)
            ),
            "",
        )
        if path not in files:
            files.append(path)
    return files


def has_file_modification(calls: Iterable[ToolCall], patterns: AnchorPatterns) -> bool:
    return any(call.name in patterns.file_modification_tools for call in calls)


def analyze_completion_patterns(
    turn: TurnView, patterns: AnchorPatterns
) -> dict[str, tuple[float, str]]:
    """The completion patterns ``turn`` shows: {pattern: (confidence, description)}; empty when none."""
    if not (
        has_file_modification(turn.tool_calls, patterns)
        and has_test_success(turn.tool_results, patterns)
    ):
        return {}
    files = (
        ", ".join(f for f in modified_files(turn.tool_calls, patterns) if f) or "the modified files"
    )
    if turn.previous_error:
        return {
            ERROR_RESOLUTION: (
                ERROR_RESOLUTION_CONFIDENCE,
                f"Build error fixed in {files} and tests now pass",
            )
        }
    return {
        TASK_COMPLETION: (
            TASK_COMPLETION_CONFIDENCE,
            f"File changes implemented in {files} and tests pass",
        )
    }


def detect_anchor(turn: TurnView, patterns: AnchorPatterns | None = None) -> Anchor | None:
    """The anchor this turn is, or None when no pattern reaches the confidence threshold.

    Error resolution is checked first, as in the seed.
    """
    patterns = patterns or AnchorPatterns()
    found = analyze_completion_patterns(turn, patterns)
    error = found.get(ERROR_RESOLUTION)
    if error and error[0] >= CONFIDENCE_THRESHOLD:
        return Anchor(
            ERROR_RESOLUTION, ERROR_RESOLUTION_WEIGHT, ERROR_RESOLUTION_CONFIDENCE, error[1]
        )
    task = found.get(TASK_COMPLETION)
    if task and task[0] >= CONFIDENCE_THRESHOLD:
        return Anchor(TASK_COMPLETION, TASK_COMPLETION_WEIGHT, TASK_COMPLETION_CONFIDENCE, task[1])
    return None


def has_error(results: Iterable[ToolResult]) -> bool:
    """True when any tool result of a turn failed: the next turn's ``previous_error``."""
    return any(r.is_error for r in results)
