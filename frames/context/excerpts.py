"""An excerpt of a long text: the passage that best matches a query, cut to a token limit.

A handle too large for the room its rank leaves in a pack, in every other form, is shown
as an excerpt (docs/retrieval.md#3-filling-shorter-forms-before-skipping): the text is
split into short pieces at line ends (a long line at spaces), each piece is scored with
BM25 for the query's terms among the text's own pieces, and the window grows from the
best piece towards the better-scoring neighbour while it fits. Without a query, or when
no piece holds a query term, the excerpt is the text's opening. A cut end is marked with
an ellipsis. Pure: strings in, a string out.
"""

import math
import re
from collections.abc import Sequence

from contextops.relevance import analyze, bm25

# Pieces of about this many tokens: small enough that a window of the least excerpt
# (EXCERPT_MIN_TOKENS, in frames.context.packing) holds several.
PIECE_TOKENS = 24
MIN_PIECE_CHARS = 48
HEAD, TAIL = "… ", " …"
_BREAK = re.compile(r"\n|(?<=[.!?;])\s+")


def pieces(text: str, piece_chars: int) -> list[tuple[int, int]]:
    """``text`` as consecutive (start, end) spans of at most about ``piece_chars``: cut at
    line ends and sentence ends where it can, else at the last space, else anywhere."""
    spans: list[tuple[int, int]] = []
    start, length = 0, len(text)
    while start < length:
        end = min(length, start + piece_chars)
        if end < length:
            window = text[start:end]
            cut = max((m.end() for m in _BREAK.finditer(window)), default=0)
            if cut < piece_chars // 3:
                cut = window.rfind(" ") + 1
            if cut > 0:
                end = start + cut
        spans.append((start, end))
        start = end
    return spans


def excerpt(text: str, tokens: int, limit: int, query: Sequence[str]) -> str:
    """The passage of ``text`` (``tokens`` long) that best matches ``query`` (distinct
    terms, ``contextops.relevance.query_terms``), of at most ``limit`` tokens counted
    as ``frames.context.packing.scaled_tokens`` counts them: in proportion to the
    characters kept, plus one. Empty when ``limit`` leaves no room for a character."""
    if tokens <= 0 or not text:
        return ""
    room = math.floor(len(text) * (limit - 1) / tokens)
    if room >= len(text):
        return text
    room -= len(HEAD) + len(TAIL)
    if room <= 0:
        return ""
    piece_chars = max(MIN_PIECE_CHARS, math.floor(len(text) / tokens * PIECE_TOKENS))
    spans = pieces(text, piece_chars)
    scores = bm25(query, [analyze(text[start:end]) for start, end in spans])
    best = int(scores.argmax()) if len(spans) and scores.max() > 0 else 0
    low = high = best
    if spans[best][1] - spans[best][0] > room:
        start = spans[best][0]
        return _marked(text, start, start + room)
    while True:
        before = low - 1 if low > 0 else None
        after = high + 1 if high + 1 < len(spans) else None
        grown = [i for i in (after, before) if i is not None]
        if not grown:
            break
        step = max(grown, key=lambda i: scores[i])  # after first on a tie: read on
        start = spans[min(low, step)][0]
        end = spans[max(high, step)][1]
        if end - start > room:
            break
        low, high = min(low, step), max(high, step)
    start, end = spans[low][0], spans[high][1]
    # What room is left takes the next words, up to a space.
    spare = text[end : end + room - (end - start)]
    if end + len(spare) < len(text):
        spare = spare[: spare.rfind(" ") + 1]
    return _marked(text, start, end + len(spare))


def _marked(text: str, start: int, end: int) -> str:
    """``text[start:end]``, stripped, with an ellipsis where it is cut."""
    body = text[start:end].strip()
    return (HEAD if start > 0 else "") + body + (TAIL if end < len(text) else "")
