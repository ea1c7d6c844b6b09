"""Embeddings of stored texts: the only module that imports ``wordllama`` or calls an
embeddings API.

One interface, ``Embedder.embed(texts, input_type) -> ndarray``, three providers picked
by CONTEXTOPS_EMBEDDINGS:

- ``wordllama`` (the default): a static embedding model whose 256-dimension weights and
  tokenizer ship inside its wheel; loaded once per process, lazily, from the package's
  own folder with downloads disabled, so it runs on CPU with no network and writes
  nothing. About 0.1 ms for one short text.
- ``openai``: any OpenAI-compatible ``POST {CONTEXTOPS_EMBEDDINGS_URL}/embeddings``
  (``{"model", "input": [...]}``, answered with ``data[i].embedding``).
- ``voyage``: a Voyage-compatible ``POST {CONTEXTOPS_EMBEDDINGS_URL}/embeddings``
  (``input``, ``model`` and ``input_type``: ``document`` for stored rows, ``query`` for a
  question).
- ``none``: no vectors; ``embeddings_enabled()`` is False and rows keep NULL.

Vectors are float32, L2-normalized, one row per text (a zero row for an empty text), so
a dot product is the cosine similarity. They are stored compactly as float16
little-endian bytes (``vector_to_bytes``); ``vectors_from_bytes`` reads many stored rows
into one matrix at once.

Writes call ``vectors_for_storage``: it never raises, so a provider that fails never
loses a write. The row keeps NULL, a warning is logged, and ``manage.py
embeddings_backfill`` fills it later.

Tests swap a fake in at this one seam (``embedder_override(fake)``), or point the real
HTTP providers at a local server through CONTEXTOPS_EMBEDDINGS_URL.
"""

import inspect
import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

import httpx
import numpy as np
from django.conf import settings

logger = logging.getLogger(__name__)

WORDLLAMA_DIM = 256
# A text is embedded from its first characters: a static model averages its tokens, and
# hosted models refuse inputs past their limit (8,191 tokens for OpenAI's).
MAX_TEXT_CHARS = 8_000
# wordllama pads a batch to its longest text: batches are cut so that count x longest
# stays small (about 50,000 tokens, 50 MB of floats at most).
WORDLLAMA_BATCH_CHARS = 200_000
HOSTED_BATCH = 128
# Dimensions of well-known hosted models, when CONTEXTOPS_EMBEDDINGS_DIM does not say.
KNOWN_DIMS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
    "voyage-3": 1024,
    "voyage-3.5": 1024,
    "voyage-3-large": 1024,
    "voyage-3-lite": 512,
    "voyage-3.5-lite": 1024,
}
PROVIDERS = ("wordllama", "openai", "voyage", "none")


class EmbeddingError(Exception):
    """The provider could not give vectors: what was asked of whom, and what came back."""


class EmbeddingsDisabled(EmbeddingError):
    """CONTEXTOPS_EMBEDDINGS is ``none``."""


class Embedder(Protocol):
    name: str

    @property
    def dim(self) -> int: ...

    def embed(self, texts: list[str], input_type: str = "document") -> np.ndarray:
        """float32 vectors, one row per text, in order (not yet normalized)."""
        ...


def _normalized(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length; a zero row (or one that is not finite) stays zero."""
    matrix = np.nan_to_num(np.asarray(matrix, dtype=np.float32), nan=0.0, posinf=0.0, neginf=0.0)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    normalized: np.ndarray = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
    return normalized


# --- wordllama -------------------------------------------------------------------------

_wordllama_model: Any = None
_wordllama_lock = threading.Lock()


def _wordllama() -> Any:
    """The model, loaded on first use from the files inside the ``wordllama`` package.

    ``WordLlama.load()`` alone looks for the tokenizer under ~/.cache and downloads it;
    the package's own folder as ``cache_dir`` finds both files where the wheel put them.
    """
    global _wordllama_model
    if _wordllama_model is None:
        with _wordllama_lock:
            if _wordllama_model is None:
                # Imported on first use: the import alone takes most of a second, which
                # every process (a CLI command, a worker) would pay even with a hosted provider.
                from wordllama import WordLlama

                _wordllama_model = WordLlama.load(
                    cache_dir=Path(inspect.getfile(WordLlama)).parent,
                    dim=WORDLLAMA_DIM,
                    disable_download=True,
                )
    return _wordllama_model


class WordLlamaEmbedder:
    name = "wordllama"
    dim = WORDLLAMA_DIM

    def embed(self, texts: list[str], input_type: str = "document") -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        # Shortest first, so texts of one batch pad to about the same length.
        order = sorted((i for i, t in enumerate(texts) if t.strip()), key=lambda i: len(texts[i]))
        if not order:
            return out
        model = _wordllama()
        start = 0
        while start < len(order):
            end = start + 1
            while end < len(order) and (end - start + 1) * len(texts[order[end]]) <= (
                WORDLLAMA_BATCH_CHARS
            ):
                end += 1
            chunk = order[start:end]
            out[chunk] = model.embed([texts[i] for i in chunk], norm=False, batch_size=len(chunk))
            start = end
        return out


# --- hosted providers ------------------------------------------------------------------


class HostedEmbedder:
    """An embeddings API over HTTP: OpenAI-compatible (``openai``) or Voyage-compatible
    (``voyage``); both answer ``{"data": [{"embedding": [...], "index": i}, ...]}``."""

    def __init__(
        self,
        *,
        name: str,
        url: str,
        model: str,
        api_key: str = "",
        dim: int = 0,
        timeout: float = 10.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not url:
            raise EmbeddingError(
                f"CONTEXTOPS_EMBEDDINGS={name} needs CONTEXTOPS_EMBEDDINGS_URL (the API's base, "
                "e.g. https://api.openai.com/v1)."
            )
        if not model:
            raise EmbeddingError(f"CONTEXTOPS_EMBEDDINGS={name} needs CONTEXTOPS_EMBEDDINGS_MODEL.")
        self.name = name
        self.model = model
        self.endpoint = url.rstrip("/") + "/embeddings"
        self._dim = dim or KNOWN_DIMS.get(model, 0)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=min(timeout, 5.0)),
            transport=transport,
        )

    @property
    def dim(self) -> int:
        if not self._dim:
            raise EmbeddingError(
                f"The dimension of {self.model!r} is not known: set CONTEXTOPS_EMBEDDINGS_DIM."
            )
        return self._dim

    def _body(self, texts: list[str], input_type: str) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "input": texts}
        if self.name == "voyage":
            body["input_type"] = input_type
        return body

    def _call(self, texts: list[str], input_type: str) -> np.ndarray:
        where = f"{self.name} embeddings at {self.endpoint}"
        try:
            response = self.client.post(self.endpoint, json=self._body(texts, input_type))
        except httpx.TimeoutException as exc:
            raise EmbeddingError(f"{where}: no answer in time ({type(exc).__name__}).") from exc
        except httpx.HTTPError as exc:
            raise EmbeddingError(f"{where}: {type(exc).__name__}: {exc}") from exc
        if response.status_code != 200:
            raise EmbeddingError(
                f"{where} answered {response.status_code}: {response.text[:300]}".rstrip()
            )
        try:
            data = response.json()["data"]
            rows = sorted(data, key=lambda row: row.get("index", 0))
            matrix = np.array([row["embedding"] for row in rows], dtype=np.float32)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise EmbeddingError(
                f"{where} answered something other than data[i].embedding: {response.text[:300]}"
            ) from exc
        if matrix.ndim != 2 or matrix.shape[0] != len(texts):
            raise EmbeddingError(
                f"{where} answered {matrix.shape[0] if matrix.ndim else 0} vectors for {len(texts)} texts."
            )
        if self._dim and matrix.shape[1] != self._dim:
            raise EmbeddingError(
                f"{where} answered vectors of {matrix.shape[1]} dimensions; "
                f"CONTEXTOPS_EMBEDDINGS_DIM says {self._dim}."
            )
        self._dim = self._dim or int(matrix.shape[1])
        return matrix

    def embed(self, texts: list[str], input_type: str = "document") -> np.ndarray:
        filled = [i for i, t in enumerate(texts) if t.strip()]
        parts = [
            self._call([texts[i] for i in filled[at : at + HOSTED_BATCH]], input_type)
            for at in range(0, len(filled), HOSTED_BATCH)
        ]
        if not parts:
            return np.zeros((len(texts), self._dim or 0), dtype=np.float32)
        out = np.zeros((len(texts), parts[0].shape[1]), dtype=np.float32)
        out[filled] = np.concatenate(parts)
        return out


# --- choosing a provider -----------------------------------------------------------------

_embedders: dict[tuple[Any, ...], Embedder] = {}  # by the settings that made each
_override: Embedder | None = None


def _choice() -> str:
    choice = (getattr(settings, "CONTEXTOPS_EMBEDDINGS", "") or "wordllama").strip().lower()
    if choice not in PROVIDERS:
        raise EmbeddingError(
            f"CONTEXTOPS_EMBEDDINGS must be one of {', '.join(PROVIDERS)}, not {choice!r}."
        )
    return choice


def embedder_default() -> Embedder | None:
    """The provider the settings name, made once per process per setting (None for ``none``)."""
    if _override is not None:
        return _override
    choice = _choice()
    if choice == "none":
        return None
    key = (
        choice,
        getattr(settings, "CONTEXTOPS_EMBEDDINGS_URL", ""),
        getattr(settings, "CONTEXTOPS_EMBEDDINGS_MODEL", ""),
        getattr(settings, "CONTEXTOPS_EMBEDDINGS_API_KEY", ""),
        getattr(settings, "CONTEXTOPS_EMBEDDINGS_DIM", 0),
        getattr(settings, "CONTEXTOPS_EMBEDDINGS_TIMEOUT", 10.0),
    )
    embedder = _embedders.get(key)
    if embedder is None:
        if choice == "wordllama":
            embedder = WordLlamaEmbedder()
        else:
            embedder = HostedEmbedder(
                name=choice,
                url=key[1],
                model=key[2],
                api_key=key[3],
                dim=int(key[4] or 0),
                timeout=float(key[5]),
            )
        _embedders[key] = embedder
    return embedder


@contextmanager
def embedder_override(embedder: Embedder | None) -> Iterator[None]:
    """Every embedding in the block comes from ``embedder`` (a test's fake)."""
    global _override
    previous, _override = _override, embedder
    try:
        yield
    finally:
        _override = previous


def embeddings_enabled() -> bool:
    """Whether rows get vectors (CONTEXTOPS_EMBEDDINGS is not ``none``)."""
    return _override is not None or _choice() != "none"


def embedding_dim() -> int:
    """The provider's dimension (256 for wordllama); EmbeddingError when disabled, or
    when a hosted model's dimension is neither known nor set."""
    embedder = embedder_default()
    if embedder is None:
        raise EmbeddingsDisabled("Embeddings are off (CONTEXTOPS_EMBEDDINGS=none).")
    return embedder.dim


def embed_texts(texts: list[str], *, input_type: str = "document") -> np.ndarray:
    """float32, shape (len(texts), dim), rows L2-normalized; a zero row for an empty text.

    ``input_type`` is ``document`` for stored rows and ``query`` for a question (Voyage
    embeds them differently; the others ignore it). Raises EmbeddingError when the
    provider fails or embeddings are off."""
    embedder = embedder_default()
    if embedder is None:
        raise EmbeddingsDisabled("Embeddings are off (CONTEXTOPS_EMBEDDINGS=none).")
    clipped = [(t or "")[:MAX_TEXT_CHARS] for t in texts]
    matrix = _normalized(embedder.embed(clipped, input_type))
    if matrix.shape != (len(texts), embedder.dim):
        raise EmbeddingError(
            f"The {embedder.name} embeddings gave a {matrix.shape} matrix for {len(texts)} texts."
        )
    return matrix


def embed_query(text: str) -> np.ndarray | None:
    """One question's vector (1-D), or None when embeddings are off or the provider failed
    (logged): a pack ranks without the semantic score rather than fail."""
    if not embeddings_enabled():
        return None
    try:
        vector: np.ndarray = embed_texts([text], input_type="query")[0]
        return vector
    except EmbeddingError as exc:
        logger.warning("embedding the query failed; ranking without it: %s", exc)
        return None


def vectors_for_storage(texts: Sequence[str]) -> list[bytes | None]:
    """What a write stores for each text: its vector as bytes, or None (the column stays
    NULL for the backfill) when embeddings are off or the provider failed. Never raises."""
    if not texts:
        return []
    try:
        if not embeddings_enabled():
            return [None] * len(texts)
        matrix = embed_texts(list(texts))
    except Exception as exc:  # a provider's failure must never lose the write
        logger.warning(
            "embedding %s text(s) failed; stored without a vector until "
            "`manage.py embeddings_backfill`: %s",
            len(texts),
            exc,
        )
        return [None] * len(texts)
    return [vector_to_bytes(row) for row in matrix]


def vector_for_storage(text: str) -> bytes | None:
    """``vectors_for_storage`` for one text."""
    return vectors_for_storage([text])[0]


# --- stored form ---------------------------------------------------------------------------

_F16 = np.dtype("<f2")


def vector_to_bytes(vec: np.ndarray | Sequence[float]) -> bytes:
    """The vector as float16 little-endian bytes (2 bytes a dimension: 512 for wordllama)."""
    return np.asarray(vec, dtype=np.float32).astype(_F16).tobytes()


def vector_from_bytes(blob: bytes | memoryview | None) -> np.ndarray | None:
    """A stored vector back as float32; None for NULL (or an empty value)."""
    if blob is None or len(blob) == 0:
        return None
    return np.frombuffer(blob, dtype=_F16).astype(np.float32)


def vectors_from_bytes(
    blobs: Sequence[bytes | memoryview | None], dim: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Many stored vectors at once: ``(matrix, mask)``, ``matrix`` float32 of shape
    (len(blobs), dim), ``mask`` True where a row has a vector. A NULL row, or one of
    another dimension (written before a provider change), is a zero row with mask False.

    ``dim`` defaults to the first stored row's; with no stored row the matrix has 0 columns.
    """
    width = 2 * dim if dim else next((len(b) for b in blobs if b is not None and len(b)), 0)
    mask = np.array([b is not None and len(b) == width and width > 0 for b in blobs], dtype=bool)
    matrix = np.zeros((len(blobs), width // 2), dtype=np.float32)
    if mask.any():
        joined = b"".join(
            bytes(b) for b, ok in zip(blobs, mask, strict=True) if ok and b is not None
        )
        matrix[mask] = np.frombuffer(joined, dtype=_F16).reshape(-1, width // 2)
    return matrix, mask
