"""A fake embeddings provider for tests, swapped in with ``embedder_override``.

``WordsEmbedder`` gives each word a fixed random direction (seeded by the word) and a
text the sum of its words' directions: texts sharing words are close, others nearly
orthogonal, and every vector is known in advance. It counts its calls, raises
EmbeddingError while ``failing`` is set, and runs ``during`` (when set) inside each call,
as if something else happened while the provider answered. The ``fake_embedder`` fixture
swaps one in for a test.
"""

import hashlib
import re
from collections.abc import Callable, Iterator

import numpy as np
import pytest

from contextops.embeddings import EmbeddingError, embedder_override

WORD = re.compile(r"\w+")


class WordsEmbedder:
    name = "words"

    def __init__(self, dim: int = 64) -> None:
        self.dim = dim
        self.calls: list[list[str]] = []
        self.failing = False
        self.during: Callable[[], None] | None = None

    def word(self, word: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(word.lower().encode()).digest()[:8], "little")
        return np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)

    def embed(self, texts: list[str], input_type: str = "document") -> np.ndarray:
        self.calls.append(list(texts))
        if self.during is not None:
            self.during()
        if self.failing:
            raise EmbeddingError("words embeddings: the provider is down (a test's failure)")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in WORD.findall(text):
                out[i] += self.word(word)
        return out


@pytest.fixture
def fake_embedder() -> Iterator[WordsEmbedder]:
    """Every vector in the test comes from a ``WordsEmbedder`` of 16 dimensions."""
    fake = WordsEmbedder(dim=16)
    with embedder_override(fake):
        yield fake
