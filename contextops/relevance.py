"""Relevance of texts to a query: the words compared, BM25 over a candidate set, ranks.

Pure functions over texts and numpy arrays, no database and no model: the context pack
ranks with them (``frames.context.ranking``), the recall benchmark measures them.

- ``analyze``: a text as the terms BM25 compares: lower-case words, English stop words
  out, each reduced to its Snowball stem ("painted", "painting" and "paints" are one
  term). A frame's texts are ranked again and again as an agent works, so the terms of
  each text up to ``ANALYZE_CACHE_CHARS`` are kept (``ANALYZE_CACHE_SIZE`` of them).
- ``bm25``: Okapi BM25 of one query over candidate documents, with inverse document
  frequency computed over the candidates themselves (the pack's candidate set is the
  collection it chooses from).
- ``scaled``: a score placed between the least (0) and the best (1.0) of the candidates,
  as far as it is: scores of different kinds become comparable, keep how far apart two
  candidates are, and the fused total is their weighted sum.
- ``rank_share``: a score turned into its share of its rank, scaled so the best candidate
  gets 1.0 (``(k + 1) / (k + rank)``): for an order with no distances (recency).
"""

import functools
import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np
import Stemmer

WORD = re.compile(r"[^\W_]+")  # letters and digits: "travel_policy" is two words
# English function words: the ones a question is made of ("when did she go to the...").
STOP_WORDS = frozenset(
    """a an the and or but if of at by for with about against between into through during
    before after above below to from up down in out on off over under again further then
    once here there when where why how all any both each few more most other some such no
    nor not only own same so than too very s t can will just don should now i me my myself
    we our ours ourselves you your yours yourself yourselves he him his himself she her
    hers herself it its itself they them their theirs themselves what which who whom this
    that these those am is are was were be been being have has had having do does did
    doing would could shall might must also""".split()
)
ANALYZE_CACHE_CHARS, ANALYZE_CACHE_SIZE = 4_000, 16_384
BM25_K1, BM25_B = 1.2, 0.75


@functools.cache
def _stemmer() -> Stemmer.Stemmer:
    return Stemmer.Stemmer("english")


def _analyze(text: str) -> tuple[str, ...]:
    words = [w for w in WORD.findall(text.lower()) if w not in STOP_WORDS]
    return tuple(_stemmer().stemWords(words))


_analyze_kept = functools.lru_cache(maxsize=ANALYZE_CACHE_SIZE)(_analyze)


def analyze(text: str) -> tuple[str, ...]:
    """The terms of ``text`` in order (repeats kept): stems of its words, stop words out."""
    if not text:
        return ()
    if len(text) <= ANALYZE_CACHE_CHARS:
        return _analyze_kept(text)
    return _analyze(text)


def query_terms(query: str) -> list[str]:
    """The distinct terms of ``query``, in order."""
    return list(dict.fromkeys(analyze(query)))


@functools.lru_cache(maxsize=ANALYZE_CACHE_SIZE)
def _counts(terms: tuple[str, ...]) -> Counter[str]:
    return Counter(terms)


def _text_terms(text: str) -> tuple[Counter[str], int]:
    terms = analyze(text)
    return Counter(terms), len(terms)


_text_terms_kept = functools.lru_cache(maxsize=ANALYZE_CACHE_SIZE)(_text_terms)


def text_terms(text: str) -> tuple[Counter[str], int]:
    """The terms of ``text`` counted, and how many it has (``analyze``'s, kept the same way)."""
    if len(text) <= ANALYZE_CACHE_CHARS:
        return _text_terms_kept(text)
    return _text_terms(text)


def bm25(query: Sequence[str], documents: Sequence[tuple[str, ...]]) -> np.ndarray:
    """BM25 of ``query`` (distinct terms) for each of ``documents`` (their terms).

    Inverse document frequency is Lucene's (never negative):
    ``log(1 + (N - n + 0.5) / (n + 0.5))`` over these ``documents``. A document sharing
    no term with the query scores 0; so does every document when the query has no terms.
    """
    return bm25_counted(query, [(_counts(d), len(d)) for d in documents])


def bm25_texts(
    query: Sequence[str], texts: Sequence[str], indexed: "TermIndex | None" = None
) -> np.ndarray:
    """``bm25`` of ``query`` over ``texts`` (each analyzed, its terms counted once and kept).

    ``indexed``: the first ``indexed.count`` texts already indexed (``TermIndex``), read
    by term from there; the others are counted here."""
    if indexed is None or not indexed.count:
        return bm25_counted(query, [text_terms(text) for text in texts])
    rest = [text_terms(text) for text in texts[indexed.count :]]
    count = indexed.count + len(rest)
    scores = np.zeros(count, dtype=np.float64)
    if not query:
        return scores
    lengths = np.concatenate(
        [indexed.lengths, np.fromiter((n for _, n in rest), np.float64, len(rest))]
    )
    average = float(lengths.mean()) or 1.0
    norm = BM25_K1 * (1 - BM25_B + BM25_B * lengths / average)
    for term in query:
        tf = np.zeros(count, dtype=np.float64)
        tf[: indexed.count] = indexed.frequencies(term)
        tf[indexed.count :] = [c.get(term, 0) for c, _ in rest]
        found = int(np.count_nonzero(tf))
        if not found:
            continue
        idf = math.log(1 + (count - found + 0.5) / (found + 0.5))
        held = tf > 0
        scores[held] += idf * tf[held] * (BM25_K1 + 1) / (tf[held] + norm[held])
    return scores


class TermIndex:
    """Texts' terms counted once, by term: for each term, which texts hold it and how
    often (a frame's handles are ranked pack after pack; only the query changes)."""

    def __init__(self, texts: Sequence[str]) -> None:
        counted = [text_terms(text) for text in texts]
        self.count = len(counted)
        self.lengths = np.fromiter((n for _, n in counted), np.float64, self.count)
        postings: dict[str, tuple[list[int], list[int]]] = {}
        for index, (counts, _) in enumerate(counted):
            for term, frequency in counts.items():
                where, how_often = postings.setdefault(term, ([], []))
                where.append(index)
                how_often.append(frequency)
        self._postings = {
            term: (np.array(where, dtype=np.int64), np.array(how_often, dtype=np.float64))
            for term, (where, how_often) in postings.items()
        }

    def frequencies(self, term: str) -> np.ndarray:
        """How often each text holds ``term``."""
        tf = np.zeros(self.count, dtype=np.float64)
        posting = self._postings.get(term)
        if posting is not None:
            tf[posting[0]] = posting[1]
        return tf


def bm25_counted(query: Sequence[str], counted: Sequence[tuple[Counter[str], int]]) -> np.ndarray:
    """``bm25`` over documents given as (their terms counted, their length). Only the
    documents holding a query term are read term by term."""
    count = len(counted)
    scores = np.zeros(count, dtype=np.float64)
    if not count or not query:
        return scores
    wanted = frozenset(query)
    hits = [i for i, (c, _) in enumerate(counted) if not c.keys().isdisjoint(wanted)]
    if not hits:
        return scores
    lengths = np.fromiter((n for _, n in counted), dtype=np.float64, count=count)
    average = float(lengths.mean()) or 1.0
    norm = BM25_K1 * (1 - BM25_B + BM25_B * lengths[hits] / average)
    found_counts = [counted[i][0] for i in hits]
    total = np.zeros(len(hits), dtype=np.float64)
    for term in query:
        tf = np.array([c.get(term, 0) for c in found_counts], dtype=np.float64)
        found = int(np.count_nonzero(tf))
        if not found:
            continue
        idf = math.log(1 + (count - found + 0.5) / (found + 0.5))
        total += idf * tf * (BM25_K1 + 1) / (tf + norm)
    scores[hits] = total
    return scores


def ranks(scores: np.ndarray) -> np.ndarray:
    """1-based rank of each score, highest first; ties keep their order."""
    order = np.argsort(-scores, kind="stable")
    positions = np.empty(len(scores), dtype=np.float64)
    positions[order] = np.arange(1, len(scores) + 1)
    return positions


def rank_share(scores: np.ndarray, k: float, *, zero_counts: bool = False) -> np.ndarray:
    """``(k + 1) / (k + rank)`` per score: 1.0 for the best, falling with rank.

    Unless ``zero_counts``, a score of 0 or less (no evidence at all) shares nothing."""
    shares = (k + 1) / (k + ranks(scores))
    if not zero_counts:
        shares[scores <= 0] = 0.0
    return shares


def scaled(scores: np.ndarray, *, lowest: float | None = None) -> np.ndarray:
    """Each score placed between ``lowest`` (0) and the best (1.0), as far as it is.

    ``lowest`` defaults to the least of the positive scores; a score of 0 or less (no
    evidence at all) is 0. When every positive score is the same, each is the best: 1.0."""
    out = np.zeros(len(scores), dtype=np.float64)
    held = scores > 0
    if not held.any():
        return out
    best = float(scores[held].max())
    floor = float(scores[held].min()) if lowest is None else lowest
    if best <= floor:
        out[held] = 1.0
        return out
    out[held] = np.clip((scores[held] - floor) / (best - floor), 0.0, 1.0)
    return out
