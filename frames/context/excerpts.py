"""An excerpt of a long text: the passage that best matches a query, cut to a token limit.

A handle too large for the room its rank leaves in a pack, in every other form, is shown
as an excerpt (docs/retrieval.md#excerpts-the-passage-the-query-asks-about): the text
is split into pieces of whole lines (short lines gathered, a long one cut at sentence
ends), each piece is scored with BM25 for the query's terms among the text's own pieces;
the pieces that hold query terms are taken best first while they fit, then their
neighbours, the better-scoring first, and the room left takes the next words up to a
space. Without a query, or when no piece holds a query term, the excerpt grows from the
text's opening. The pieces are shown in the text's order; a gap or a cut end is marked
with an ellipsis. Pure: strings in, a string out.
"""

import math
import re
from collections.abc import Sequence
from typing import Any

from contextops.relevance import analyze, bm25

# Pieces of about this many tokens: small enough that a window of the least excerpt
# (EXCERPT_MIN_TOKENS, in frames.context.packing) holds several.
PIECE_TOKENS = 24
MIN_PIECE_CHARS = 48
LONG_LINE = 4
HEAD, TAIL, GAP = "… ", " …", " … "
_LINE = re.compile(r"[^\n]*(?:\n|$)")
_SENTENCE = re.compile(r"(?<=[.!?;])\s+")


def pieces(text: str, piece_chars: int) -> list[tuple[int, int]]:
    """``text`` as consecutive (start, end) spans: whole lines, short ones gathered up to
    ``piece_chars``; a line over LONG_LINE times that cut at sentence ends where it can,
    else at the last space, else anywhere."""
    spans: list[tuple[int, int]] = []
    start = 0
    for match in _LINE.finditer(text):
        end = match.end()
        if end == start:
            continue
        if spans and spans[-1][1] == start and end - spans[-1][0] <= piece_chars:
            spans[-1] = (spans[-1][0], end)  # a short line joins the short piece before
        elif end - start > LONG_LINE * piece_chars:
            spans += _cut(text, start, end, piece_chars)
        else:
            spans.append((start, end))
        start = end
    return spans


def _cut(text: str, start: int, stop: int, piece_chars: int) -> list[tuple[int, int]]:
    """``text[start:stop]`` (one long line) in spans of at most ``piece_chars``."""
    spans = []
    while start < stop:
        end = min(stop, start + piece_chars)
        if end < stop:
            window = text[start:end]
            cut = max((m.end() for m in _SENTENCE.finditer(window)), default=0)
            if cut < piece_chars // 3:
                cut = window.rfind(" ") + 1
            if cut > 0:
                end = start + cut
        spans.append((start, end))
        start = end
    return spans


def excerpt(text: str, tokens: int, limit: int, query: Sequence[str]) -> str:
    """The passages of ``text`` (``tokens`` long) that best match ``query`` (distinct
    terms, ``contextops.relevance.query_terms``), in the text's order, of at most
    ``limit`` tokens counted as ``frames.context.packing.scaled_tokens`` counts them: in
    proportion to the characters kept, plus one. Empty when ``limit`` leaves no room."""
    if tokens <= 0 or not text:
        return ""
    room = math.floor(len(text) * (limit - 1) / tokens)
    if room >= len(text):
        return text
    piece_chars = max(MIN_PIECE_CHARS, math.floor(len(text) / tokens * PIECE_TOKENS))
    spans = pieces(text, piece_chars)
    scores = bm25(query, [analyze(text[start:end]) for start, end in spans])
    shown = _Shown(text, spans)
    # The pieces that hold query terms, best first, each where it still fits...
    for index in sorted(range(len(spans)), key=lambda i: (-scores[i], i)):
        if scores[index] <= 0:
            break
        if shown.length(index) <= room:
            shown.add(index)
    if not shown.chosen:  # ...else the opening.
        first = _render(text, spans, {0})
        if len(first) > room:
            return _marked(text, 0, room - len(TAIL)) if room > len(TAIL) else ""
        shown.add(0)
    # Then the neighbours, the better-scoring first (the later one on a tie: read on).
    while True:
        for index in sorted(shown.edges(), key=lambda i: (-scores[i], -i)):
            if shown.length(index) <= room:
                shown.add(index)
                break
        else:
            return _render(text, spans, _spare(text, spans, shown.chosen, scores, room))


class _Shown:
    """The pieces an excerpt has chosen, as runs of neighbours, and the length
    ``_render`` gives them, kept as pieces are added: a piece is tried in constant time,
    not by rendering the excerpt again (a long text has thousands of pieces, and an
    excerpt of a large room thousands of them)."""

    def __init__(self, text: str, spans: list[tuple[int, int]]) -> None:
        self.spans, self.size = spans, len(text)
        self.chosen: set[int] = set()
        self.start_of: dict[int, int] = {}  # a run's last piece -> its first
        self.end_of: dict[int, int] = {}  # a run's first piece -> its last
        self.body = 0  # the runs' stripped lengths, summed
        self.low, self.high = len(spans), -1  # the first and last pieces chosen
        # Each piece's first and last non-space character (end excluded); for a run, its
        # first and last pieces that are not blank.
        self.first, self.last = [0] * len(spans), [0] * len(spans)
        self.next_shown, self.prev_shown = [len(spans)] * len(spans), [-1] * len(spans)
        for index, (start, end) in enumerate(spans):
            piece = text[start:end]
            stripped = piece.strip()
            if stripped:
                self.first[index] = start + len(piece) - len(piece.lstrip())
                self.last[index] = self.first[index] + len(stripped)
                self.prev_shown[index] = index
            elif index:
                self.prev_shown[index] = self.prev_shown[index - 1]
        for index in range(len(spans) - 1, -1, -1):
            if self.prev_shown[index] == index:
                self.next_shown[index] = index
            elif index + 1 < len(spans):
                self.next_shown[index] = self.next_shown[index + 1]

    def _stripped(self, a: int, b: int) -> int:
        """The length of pieces ``a`` to ``b`` joined and stripped."""
        first = self.next_shown[a]
        return 0 if first > b else self.last[self.prev_shown[b]] - self.first[first]

    def _merged(self, index: int) -> tuple[int, int, int]:
        """The run ``index`` would make (first, last piece) and the body length it would
        give the excerpt."""
        a = self.start_of[index - 1] if index - 1 in self.chosen else index
        b = self.end_of[index + 1] if index + 1 in self.chosen else index
        body = self.body + self._stripped(a, b)
        if a < index:
            body -= self._stripped(a, index - 1)
        if b > index:
            body -= self._stripped(index + 1, b)
        return a, b, body

    def length(self, index: int) -> int:
        """``len(_render(text, spans, chosen | {index}))``."""
        a, b, body = self._merged(index)
        runs = len(self.end_of) + 1 - (a < index) - (b > index)
        low, high = min(index, self.low), max(index, self.high)
        head = len(HEAD) if self.spans[low][0] > 0 else 0
        tail = len(TAIL) if self.spans[high][1] < self.size else 0
        return head + body + len(GAP) * (runs - 1) + tail

    def add(self, index: int) -> None:
        a, b, self.body = self._merged(index)
        if a < index:
            del self.start_of[index - 1]
        if b > index:
            del self.end_of[index + 1]
        self.end_of[a], self.start_of[b] = b, a
        self.low, self.high = min(index, self.low), max(index, self.high)
        self.chosen.add(index)

    def edges(self) -> set[int]:
        """The pieces next to a run."""
        before = {a - 1 for a in self.end_of if a > 0}
        return before | {b + 1 for b in self.start_of if b + 1 < len(self.spans)}


def _spare(
    text: str, spans: list[tuple[int, int]], chosen: set[int], scores: Any, room: int
) -> set[int]:
    """``chosen`` with the room still left given to the next words after one of its runs
    (the better-scoring next piece's opening, up to a space); ``spans`` is changed to cut
    that piece."""
    spare = room - len(_render(text, spans, chosen))
    # A piece between two runs cannot be cut: the runs it joins show it whole.
    after = [i for i in range(len(spans)) if i - 1 in chosen and not {i, i + 1} & chosen]
    for index in sorted(after, key=lambda i: (-scores[i], -i))[:1]:
        start, end = spans[index]
        words = text[start : start + spare]
        words = words[: words.rfind(" ") + 1] if start + spare < end else words
        if words.strip():
            spans[index] = (start, start + len(words))
            if len(_render(text, spans, chosen | {index})) <= room:
                return chosen | {index}
            spans[index] = (start, end)
    return chosen


def _render(text: str, spans: list[tuple[int, int]], chosen: set[int]) -> str:
    """The ``chosen`` pieces in the text's order: runs of neighbours joined, a gap or a
    cut end marked with an ellipsis."""
    runs: list[list[int]] = []
    for index in sorted(chosen):
        if runs and runs[-1][1] == index - 1:
            runs[-1][1] = index
        else:
            runs.append([index, index])
    body = GAP.join(text[spans[a][0] : spans[b][1]].strip() for a, b in runs)
    head = HEAD if spans[runs[0][0]][0] > 0 else ""
    tail = TAIL if spans[runs[-1][1]][1] < len(text) else ""
    return head + body + tail


def _marked(text: str, start: int, end: int) -> str:
    """``text[start:end]``, stripped, with an ellipsis where it is cut."""
    body = text[start:end].strip()
    return (HEAD if start > 0 else "") + body + (TAIL if end < len(text) else "")
