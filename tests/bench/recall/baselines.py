"""What the pack is measured against, computed in the same run on the same texts and
token counts: newest first, BM25, and BM25 fused with a small static embedding model.

Every baseline ranks the items once per question, then fills a token room greedily in
its rank order: an item that does not fit is skipped and the next one is tried. Nothing
here needs Django; the embedding model is passed in (``wordllama_embedder`` loads the
one inside its wheel, with downloads disabled).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from rank_bm25 import BM25Okapi

RRF_K = 60
BASELINES = ("newest", "bm25", "hybrid")
_WORD = re.compile(r"\w+")

Embedder = Callable[[list[str]], np.ndarray]


@dataclass(frozen=True)
class Item:
    """A handle or a fact as the pack and the baselines see it: its id in the API, the
    text the baselines rank, the tokens the API reported for it, the turns it stands for."""

    id: str
    text: str
    tokens: int
    dia_ids: tuple[str, ...]


def words(text: str) -> list[str]:
    """Lowercase ``\\w+`` tokens: what BM25 indexes and matches."""
    return _WORD.findall(text.lower())


def wordllama_embedder() -> Embedder:
    """WordLlama's default model from the weights inside its wheel (no download): texts
    to unit vectors."""
    from pathlib import Path

    import wordllama
    from wordllama import WordLlama

    model = WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)
    return lambda texts: np.asarray(model.embed(texts, norm=True), dtype=np.float32)


def reciprocal_rank_fusion(rankings: Iterable[Sequence[int]], k: int = RRF_K) -> dict[int, float]:
    """Each item's fused score: the sum over the rankings that hold it of 1 / (k + rank),
    ranks counted from 1."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, index in enumerate(ranking, start=1):
            fused[index] = fused.get(index, 0.0) + 1.0 / (k + rank)
    return fused


def greedy_fill(order: Sequence[int], items: Sequence[Item], room: int) -> list[int]:
    """The items taken, in ``order``, into ``room`` tokens: one that does not fit is
    skipped and the next is tried. A room of 0 or less takes nothing."""
    taken, left = [], room
    for index in order:
        if items[index].tokens <= left:
            taken.append(index)
            left -= items[index].tokens
    return taken


def recall(evidence: Sequence[str], found: Iterable[str]) -> float:
    """The share of ``evidence`` (distinct turn ids) among ``found``; 0 without evidence."""
    wanted = set(evidence)
    if not wanted:
        return 0.0
    return len(wanted & set(found)) / len(wanted)


def dia_ids_of(indexes: Iterable[int], items: Sequence[Item]) -> set[str]:
    return {dia_id for index in indexes for dia_id in items[index].dia_ids}


class Baselines:
    """The three rankings over one fixed set of items (a conversation's handles, facts or
    both), built once: the BM25 index and the item vectors."""

    def __init__(self, items: Sequence[Item], embed: Embedder) -> None:
        self.items = list(items)
        self.embed = embed
        # BM25Okapi divides by the corpus size: an empty corpus has nothing to rank.
        self.bm25 = BM25Okapi([words(item.text) for item in self.items]) if self.items else None
        self.vectors = embed([item.text for item in self.items]) if self.items else np.zeros((0, 1))

    def rankings(self, query: str) -> dict[str, list[int]]:
        """Each baseline's order of the items (indexes) for ``query``; ties go newest first.

        - ``newest``: the last written first.
        - ``bm25``: by BM25 score.
        - ``hybrid``: reciprocal rank fusion (k=60) of the BM25 ranking of the items that
          share a word with the query (what a lexical retriever returns) and the ranking of
          every item by cosine similarity to the query.
        """
        n = len(self.items)
        newest = list(range(n - 1, -1, -1))
        if not n or self.bm25 is None:
            return {"newest": newest, "bm25": [], "hybrid": []}
        scores = self.bm25.get_scores(words(query))
        bm25 = sorted(range(n), key=lambda i: (-scores[i], -i))
        matched = [i for i in bm25 if scores[i] > 0]
        cosine = self.vectors @ self.embed([query])[0]
        semantic = sorted(range(n), key=lambda i: (-cosine[i], -i))
        fused = reciprocal_rank_fusion([matched, semantic])
        hybrid = sorted(range(n), key=lambda i: (-fused.get(i, 0.0), -i))
        return {"newest": newest, "bm25": bm25, "hybrid": hybrid}

    def recalls(
        self, query: str, evidence: Sequence[str], rooms: Sequence[int]
    ) -> list[dict[str, float]]:
        """For each token room of ``rooms``: each baseline's recall of ``evidence``."""
        orders = self.rankings(query)
        return [
            {
                name: recall(
                    evidence, dia_ids_of(greedy_fill(orders[name], self.items, room), self.items)
                )
                for name in BASELINES
            }
            for room in rooms
        ]
