"""One ranking over everything a context pack may hold: pure rules, no database.

Every candidate (a frame's handle, a current fact, a working-set item) gets a score made
of parts, each kept so the pack can say why it chose what it chose:

- ``priority``: the tier of docs/concepts.md#priorities (critical 100, high 75, medium 50,
  low 25, background 10) as a weight, divided by 100.
- ``attention``: the handle's attention weight as a boost, ``ATTENTION_WEIGHT`` times its
  distance from the neutral 1.0 (clipped to ±1): a hot handle rises, a cooled one sinks.
- ``recency``: the newest of its section first, as a share of its rank.
- With a query, relevance: ``lexical`` (BM25 over the candidates, stemmed, with inverse
  document frequency; a long text scored by its best passage, ``passages``) as a share
  of the best candidate's BM25, and ``semantic`` (cosine
  of embeddings computed when the item was written) placed between the least and the
  most similar candidate, each weighted: 1.0 for the best, 0 for the least, and in
  between as far as the score is (a convex combination of normalized scores, which kept
  more evidence on the development conversations than reciprocal rank fusion did);
  ``neighbour``: a handle next to a relevant handle in its frame shares part of that
  relevance (a conversation's answer sits beside its question).
- ``older``: the penalty that puts an older near-duplicate right behind the newer item
  that says nearly the same thing (the implicit and temporal rules of
  docs/concepts.md#supersession, at read time: nothing is invalidated), marked
  ``older_than``.

``total`` is the sum of the parts. The weights were tuned on development conversations
(docs/retrieval.md gives the figures) and are written here once.
"""

from dataclasses import dataclass, field

import numpy as np

from contextops.relevance import TermIndex, bm25_texts, query_terms, rank_share, scaled
from frames.models.context import SCORE_PARTS
from frames.priorities import PRIORITY_SCORES as PRIORITY_SCORE

from .excerpts import pieces

RRF_K = 10
LEXICAL_WEIGHT = 1.0
SEMANTIC_WEIGHT = 1.0
NEIGHBOUR_WEIGHT = 0.5
# Recency orders candidates of equal priority without a query; with one, it only breaks
# ties: at most a thousandth, under any relevance share a candidate of a few hundred can
# have (at 0.05 the newest items outranked relevant ones at the tail of a full pack).
# Both stay under the smallest gap between two priority tiers (0.15).
RECENCY_WEIGHT = 0.1
RECENCY_WEIGHT_WITH_QUERY = 0.001
ATTENTION_WEIGHT = 0.1
# Two candidates of one group whose embeddings are this close say nearly the same thing:
# two current facts of one subject (a value said twice, differently) at a lower bar than
# two handles of one frame (a conversation repeats itself in other words).
DUPLICATE_SIMILARITY = {"facts": 0.85, "segments": 0.95}
# Near-duplicates are looked for among this many best candidates (pairs grow as its square).
DUPLICATE_WINDOW = 200
PARTS = SCORE_PARTS[1:]  # every part, in the order a pack stores them after the total
# A long text is scored by its best passage of about this many characters (whole lines).
PASSAGE_CHARS = 600


@dataclass(slots=True)
class Score:
    """A candidate's score by part; ``total`` is their sum."""

    priority: float = 0.0
    lexical: float = 0.0
    semantic: float = 0.0
    recency: float = 0.0
    attention: float = 0.0
    neighbour: float = 0.0
    older: float = 0.0

    @property
    def total(self) -> float:
        return (
            self.priority
            + self.lexical
            + self.semantic
            + self.recency
            + self.attention
            + self.neighbour
            + self.older
        )

    def as_dict(self) -> dict[str, float]:
        """``total`` and every part, rounded to four decimals (as answers and records show it)."""
        parts = {part: round(getattr(self, part), 4) for part in PARTS}
        return {"total": round(self.total, 4), **parts}


_PRIORITY_WEIGHT = {priority: score / 100 for priority, score in PRIORITY_SCORE.items()}


def priority_weight(priority: str) -> float:
    return _PRIORITY_WEIGHT.get(priority, _PRIORITY_WEIGHT["medium"])


def attention_boost(attention: float) -> float:
    return float(_attention_boosts(np.array([attention], dtype=np.float64))[0])


def _attention_boosts(attention: np.ndarray) -> np.ndarray:
    return ATTENTION_WEIGHT * np.clip(attention - 1.0, -1.0, 1.0)


@dataclass(slots=True)
class Candidate:
    """What the ranking reads of an item. ``newness`` grows with how recent the item is
    within its section; ``position`` is a handle's place in its frame's order (None for
    facts and working-set items); near-duplicates are compared within one ``group``."""

    section: str
    id: str
    priority: str
    text: str
    newness: int
    attention: float = 1.0
    vector: np.ndarray | None = None
    position: int | None = None
    group: str = ""


@dataclass
class Ranking:
    """Scores aligned with the candidates, as a matrix (a row per candidate, a column per
    part in PARTS' order), and the near-duplicates found: index of the older item -> id
    of the newer one it is older than."""

    parts: np.ndarray
    older_than: dict[int, str] = field(default_factory=dict)

    @property
    def totals(self) -> np.ndarray:
        return self.parts.sum(axis=1) if len(self.parts) else np.zeros(0)

    @property
    def scores(self) -> list[Score]:
        """Each candidate's Score (for reading one; ``rows`` is what a pack stores)."""
        return [Score(*map(float, row)) for row in self.parts]

    def order(self) -> list[int]:
        """Candidate indexes, best first (ties keep the candidates' order)."""
        return [int(i) for i in np.argsort(-self.totals, kind="stable")]

    def rows(self) -> list[list[float]]:
        """Each candidate's score as a pack records it: ``[total, *parts]`` (SCORE_PARTS'
        order), rounded to four decimals, made for every candidate at once."""
        if not len(self.parts):
            return []
        return np.round(np.column_stack([self.totals, self.parts]), 4).tolist()


def score_row(score: Score) -> list[float]:
    """``score`` as ``Ranking.rows`` gives one."""
    return [round(score.total, 4), *(round(getattr(score, part), 4) for part in PARTS)]


def _recency(candidates: list[Candidate], weight: float) -> np.ndarray:
    """Each candidate's recency share within its own section."""
    shares = np.zeros(len(candidates))
    sections = np.array([c.section for c in candidates])
    newness = np.fromiter((c.newness for c in candidates), np.float64, len(candidates))
    for section in dict.fromkeys(sections.tolist()):
        indexes = np.flatnonzero(sections == section)
        shares[indexes] = weight * rank_share(newness[indexes], RRF_K, zero_counts=True)
    return shares


def _semantic(candidates: list[Candidate], query_vector: np.ndarray | None) -> np.ndarray:
    """Cosine similarity to the query (0 for a candidate without a vector of its size)."""
    similarity = np.zeros(len(candidates))
    if query_vector is None:
        return similarity
    dim = query_vector.shape[0]
    rows = [
        i for i, c in enumerate(candidates) if c.vector is not None and c.vector.shape == (dim,)
    ]
    if rows:
        matrix = np.stack([candidates[i].vector for i in rows]).astype(np.float32, copy=False)  # type: ignore[misc]
        similarity[rows] = matrix @ query_vector.astype(np.float32, copy=False)
    return similarity


def _neighbours(candidates: list[Candidate], relevance: np.ndarray) -> np.ndarray:
    """For each handle, the larger relevance of the handles just before and after it in
    its frame (among the candidates), times NEIGHBOUR_WEIGHT."""
    spread = np.zeros(len(candidates))
    placed = np.array(
        sorted((c.position, i) for i, c in enumerate(candidates) if c.position is not None),
        dtype=np.int64,
    ).reshape(-1, 2)[:, 1]
    if len(placed) < 2:
        return spread
    ordered = relevance[placed]
    before = np.concatenate([[0.0], ordered[:-1]])
    after = np.concatenate([ordered[1:], [0.0]])
    spread[placed] = NEIGHBOUR_WEIGHT * np.maximum(before, after)
    return spread


def rank(
    candidates: list[Candidate],
    query: str = "",
    query_vector: np.ndarray | None = None,
    indexed: "PassageIndex | None" = None,
) -> Ranking:
    """Every candidate's score (see the module's docstring) for ``query``.

    ``indexed``: the texts of the first ``len(indexed.sizes)`` candidates, already split
    into passages and indexed."""
    terms = query_terms(query) if query else []
    with_query = bool(terms) or query_vector is not None
    recency = _recency(candidates, RECENCY_WEIGHT_WITH_QUERY if with_query else RECENCY_WEIGHT)
    count = len(candidates)
    lexical = np.zeros(count)
    semantic = np.zeros(count)
    neighbour = np.zeros(count)
    if with_query and count:
        if terms:
            lexical = LEXICAL_WEIGHT * scaled(_lexical(terms, candidates, indexed), lowest=0.0)
        if query_vector is not None:
            semantic = SEMANTIC_WEIGHT * scaled(_semantic(candidates, query_vector))
        neighbour = _neighbours(candidates, lexical + semantic)
    medium = _PRIORITY_WEIGHT["medium"]
    priority = np.fromiter(
        (_PRIORITY_WEIGHT.get(c.priority, medium) for c in candidates), float, count
    )
    attention = _attention_boosts(np.fromiter((c.attention for c in candidates), float, count))
    parts = np.column_stack(
        [priority, lexical, semantic, recency, attention, neighbour, np.zeros(count)]
    )
    ranking = Ranking(parts.reshape(count, len(PARTS)))
    _mark_near_duplicates(candidates, ranking)
    return ranking


def passages(text: str) -> list[str]:
    """``text`` as the passages BM25 scores it by: whole, or, past twice PASSAGE_CHARS, in
    passages of whole lines of about PASSAGE_CHARS (``frames.context.excerpts.pieces``)."""
    if len(text) <= 2 * PASSAGE_CHARS:
        return [text]
    return [text[start:end] for start, end in pieces(text, PASSAGE_CHARS)]


class PassageIndex:
    """Texts split into ``passages`` and indexed by term once (``TermIndex``), for the
    first candidates of every ranking of a frame: ``sizes``, how many passages each has."""

    def __init__(self, texts: list[str]) -> None:
        split = [passages(text) for text in texts]
        self.sizes = [len(parts) for parts in split]
        self.terms = TermIndex([part for parts in split for part in parts])


def _lexical(
    terms: list[str], candidates: list[Candidate], indexed: PassageIndex | None
) -> np.ndarray:
    """Each candidate's BM25: its best passage's, among every candidate's passages (a long
    document is as relevant as the part of it the query names, not diluted by the rest).
    ``indexed``: the first candidates' passages, already split and indexed."""
    sizes = list(indexed.sizes) if indexed is not None else []
    texts = [""] * (indexed.terms.count if indexed is not None else 0)
    for candidate in candidates[len(sizes) :]:
        parts = passages(candidate.text)
        sizes.append(len(parts))
        texts += parts
    scores = bm25_texts(terms, texts, indexed.terms if indexed is not None else None)
    starts = np.cumsum([0, *sizes[:-1]])
    return np.maximum.reduceat(scores, starts) if len(scores) else scores


def _mark_near_duplicates(candidates: list[Candidate], ranking: Ranking) -> None:
    """Among the DUPLICATE_WINDOW best candidates with vectors, two of one group whose
    embeddings are at least DUPLICATE_SIMILARITY alike (for their section) and whose texts differ: the older
    one gets an ``older`` penalty that puts it right behind the newer, and is marked."""
    best = [i for i in ranking.order() if candidates[i].vector is not None and candidates[i].group][
        :DUPLICATE_WINDOW
    ]
    if len(best) < 2:
        return
    dims = {candidates[i].vector.shape for i in best}  # type: ignore[union-attr]
    if len(dims) != 1:
        return
    matrix = np.stack([candidates[i].vector for i in best]).astype(np.float32)  # type: ignore[misc]
    norms = np.linalg.norm(matrix, axis=1)
    norms[norms == 0] = 1.0
    matrix /= norms[:, None]
    similar = matrix @ matrix.T
    threshold = np.array([DUPLICATE_SIMILARITY.get(candidates[i].section, 2.0) for i in best])
    kinds: dict[tuple[str, str], int] = {}
    kind = np.array(
        [kinds.setdefault((candidates[i].section, candidates[i].group), len(kinds)) for i in best]
    )
    texts: dict[str, int] = {}
    text = np.array([texts.setdefault(candidates[i].text, len(texts)) for i in best])
    newness = np.array([candidates[i].newness for i in best])
    alike = (
        (similar >= threshold[:, None])
        & (kind[:, None] == kind[None, :])
        & (text[:, None] != text[None, :])
    )
    # For each item, the best-ranked alike item newer than it (its row's first True).
    newer = alike & (newness[None, :] > newness[:, None])
    has_newer = newer.any(axis=1)
    partner = newer.argmax(axis=1)
    older_column = PARTS.index("older")
    # Newest first, so an item's newer partner has its own place settled before it.
    for a in sorted(np.nonzero(has_newer)[0], key=lambda a: -newness[a]):
        older, newer_index = best[a], best[int(partner[a])]
        ranking.older_than[older] = candidates[newer_index].id
        totals = ranking.parts[[older, newer_index]].sum(axis=1)
        if totals[0] >= totals[1]:
            ranking.parts[older, older_column] = -(totals[0] - totals[1] + 1e-4)
