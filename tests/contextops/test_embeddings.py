"""The embeddings seam: the wordllama model inside its wheel, the hosted providers against
a local server speaking their APIs, the stored form, and a failure that loses nothing."""

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import wordllama

from contextops import embeddings
from contextops.embeddings import (
    EmbeddingError,
    EmbeddingsDisabled,
    embed_query,
    embed_texts,
    embedder_override,
    embedding_dim,
    embeddings_enabled,
    vector_for_storage,
    vector_from_bytes,
    vector_to_bytes,
    vectors_for_storage,
    vectors_from_bytes,
)
from tests.fakes.embeddings import WordsEmbedder
from tests.fakes.embeddings_server import Answer, EmbeddingsServer, expected

ROOT = Path(__file__).resolve().parents[2]


def unit(vector) -> np.ndarray:
    vector = np.asarray(vector, dtype=np.float32)
    return vector / np.linalg.norm(vector)


# --- wordllama, the default -------------------------------------------------------------


def test_it_embeds_with_wordllama_by_default(settings):
    settings.CONTEXTOPS_EMBEDDINGS = "wordllama"
    assert embeddings_enabled() and embedding_dim() == 256
    matrix = embed_texts(["The deploy failed on the staging cluster", "", "Paris"])
    assert matrix.dtype == np.float32 and matrix.shape == (3, 256)
    assert np.allclose(np.linalg.norm(matrix[[0, 2]], axis=1), 1.0, atol=1e-5)
    assert not matrix[1].any()  # an empty text is a zero row


def test_wordllama_puts_related_texts_closer_than_unrelated_ones(settings):
    settings.CONTEXTOPS_EMBEDDINGS = "wordllama"
    cat, kitten, taxes = embed_texts(
        [
            "The cat sleeps on the sofa",
            "A kitten is napping on the couch",
            "Quarterly corporate tax filing deadline",
        ]
    )
    assert float(cat @ kitten) > float(cat @ taxes) + 0.1


def test_wordllama_embeds_a_batch_as_it_embeds_each_text(settings):
    """Batches are cut and sorted by length: the answer is in the order asked, whatever
    the lengths, and a very long text does not change its neighbours' vectors."""
    settings.CONTEXTOPS_EMBEDDINGS = "wordllama"
    texts = ["short", "word " * 30_000, "a middling sentence about budgets", "x"]
    together = embed_texts(texts)
    for i, text in enumerate(texts):
        assert np.allclose(together[i], embed_texts([text])[0], atol=1e-5)


LOAD_OFFLINE = """
import socket, sys
def refuse(*args, **kwargs):
    raise OSError("network used")
socket.socket.connect = refuse
socket.create_connection = refuse
from contextops.embeddings import WordLlamaEmbedder, _normalized
vectors = _normalized(WordLlamaEmbedder().embed(["offline works", "no network"]))
print(vectors.shape, round(float(abs(vectors).sum()), 3))
"""


def _files(folder: Path) -> dict[str, float]:
    return {
        str(p): p.stat().st_mtime
        for p in folder.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_wordllama_loads_with_no_network_and_writes_nothing(tmp_path):
    """Its weights and tokenizer come from the package's own folder: with every network
    call refused, Hugging Face told to stay offline and a proxy that goes nowhere, it
    loads and embeds, writing nothing to the home folder, a cache or the package."""
    package = Path(wordllama.__file__).parent
    before = _files(package)
    home = tmp_path / "home"
    home.mkdir()
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "HF_HOME": str(home / "hf"),
        "HF_HUB_OFFLINE": "1",
        "HTTP_PROXY": "http://127.0.0.1:9",
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(
        [sys.executable, "-c", LOAD_OFFLINE],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("(2, 256)")
    assert list(home.rglob("*")) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]
    assert _files(package) == before


# --- the seam and the settings ----------------------------------------------------------


def test_a_fake_swapped_in_at_the_seam_gives_every_vector():
    fake = WordsEmbedder(dim=8)
    with embedder_override(fake):
        assert embedding_dim() == 8
        matrix = embed_texts(["alpha beta", "beta"])
    assert fake.calls == [["alpha beta", "beta"]]
    assert np.allclose(matrix[0], unit(fake.word("alpha") + fake.word("beta")), atol=1e-6)


def test_none_turns_embeddings_off(settings):
    settings.CONTEXTOPS_EMBEDDINGS = "none"
    assert not embeddings_enabled()
    with pytest.raises(EmbeddingsDisabled):
        embed_texts(["anything"])
    with pytest.raises(EmbeddingsDisabled):
        embedding_dim()
    assert vectors_for_storage(["a", "b"]) == [None, None]
    assert embed_query("a question") is None


def test_it_refuses_an_unknown_provider_with_a_clear_error(settings):
    settings.CONTEXTOPS_EMBEDDINGS = "word2vec"
    with pytest.raises(EmbeddingError, match="wordllama, openai, voyage, none"):
        embed_texts(["x"])


def test_the_settings_refuse_an_unknown_provider_at_start():
    done = subprocess.run(
        [sys.executable, "-c", "import contextops.settings"],
        env={**os.environ, "CONTEXTOPS_EMBEDDINGS": "word2vec"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "CONTEXTOPS_EMBEDDINGS must be wordllama, openai, voyage or none" in done.stderr


# --- hosted providers ----------------------------------------------------------------------


@pytest.fixture
def server():
    with EmbeddingsServer(dim=32) as server:
        yield server


@pytest.fixture
def hosted(settings, server):
    def use(provider: str, **overrides):
        settings.CONTEXTOPS_EMBEDDINGS = provider
        settings.CONTEXTOPS_EMBEDDINGS_URL = server.base_url
        settings.CONTEXTOPS_EMBEDDINGS_MODEL = overrides.get("model", "embed-small")
        settings.CONTEXTOPS_EMBEDDINGS_API_KEY = overrides.get("api_key", "sk-test")
        settings.CONTEXTOPS_EMBEDDINGS_DIM = overrides.get("dim", 32)
        settings.CONTEXTOPS_EMBEDDINGS_TIMEOUT = overrides.get("timeout", 10)
        return server

    return use


def test_the_openai_provider_posts_model_and_input_and_reads_data_by_index(hosted):
    server = hosted("openai")
    texts = ["The invoice was paid", "", "Ship it on Friday"]
    matrix = embed_texts(texts)
    assert len(server.requests) == 1
    request = server.requests[0]
    assert request["path"] == "/v1/embeddings"
    assert request["headers"]["Authorization"] == "Bearer sk-test"
    # Empty texts are not sent; the answer's rows come back reversed and are put in order.
    assert request["body"] == {"model": "embed-small", "input": [texts[0], texts[2]]}
    assert np.allclose(matrix[0], unit(expected(texts[0], 32)), atol=1e-6)
    assert not matrix[1].any()
    assert np.allclose(matrix[2], unit(expected(texts[2], 32)), atol=1e-6)


def test_the_voyage_provider_says_document_or_query(hosted):
    server = hosted("voyage", model="voyage-3-lite", dim=32)
    embed_texts(["a stored fact"])
    query = embed_query("what was stored?")
    assert [r["body"]["input_type"] for r in server.requests] == ["document", "query"]
    assert server.requests[0]["body"]["model"] == "voyage-3-lite"
    assert query is not None and np.allclose(
        query, unit(expected("what was stored?", 32)), atol=1e-6
    )


def test_a_hosted_provider_is_asked_in_batches(hosted):
    server = hosted("openai")
    matrix = embed_texts([f"text number {i}" for i in range(300)])
    assert [len(r["body"]["input"]) for r in server.requests] == [128, 128, 44]
    assert np.allclose(matrix[299], unit(expected("text number 299", 32)), atol=1e-6)


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (Answer.status(401), "answered 401"),
        (Answer.status(503), "answered 503"),
        (Answer.raw(b"<html>gateway</html>"), "other than data"),
        (Answer.raw(json.dumps({"data": [{"embedding": [1.0] * 32}]}).encode()), "1 vectors"),
        (
            Answer.raw(json.dumps({"data": [{"index": 0, "embedding": [1.0] * 8}]}).encode()),
            "8 dimensions",
        ),
    ],
)
def test_a_hosted_failure_is_a_clear_error(hosted, answer, message):
    server = hosted("openai")
    server.script(answer)
    texts = ["one"] if "dimensions" in message else ["one", "two"]
    with pytest.raises(EmbeddingError, match=message) as caught:
        embed_texts(texts)
    assert server.base_url in str(caught.value)


def test_a_provider_that_does_not_answer_times_out(hosted):
    server = hosted("openai", timeout=1)
    server.script(Answer.hang())
    with pytest.raises(EmbeddingError, match="no answer in time"):
        embed_texts(["anyone there?"])


def test_a_provider_that_cannot_be_reached_is_a_clear_error(settings):
    settings.CONTEXTOPS_EMBEDDINGS = "openai"
    settings.CONTEXTOPS_EMBEDDINGS_URL = "http://127.0.0.1:9/v1"
    settings.CONTEXTOPS_EMBEDDINGS_MODEL = "text-embedding-3-small"
    with pytest.raises(EmbeddingError, match="ConnectError"):
        embed_texts(["x"])
    assert embedding_dim() == 1536  # a known model's dimension needs no setting


def test_a_hosted_provider_needs_its_url_and_model(settings):
    settings.CONTEXTOPS_EMBEDDINGS = "voyage"
    settings.CONTEXTOPS_EMBEDDINGS_URL = ""
    with pytest.raises(EmbeddingError, match="needs CONTEXTOPS_EMBEDDINGS_URL"):
        embed_texts(["x"])
    settings.CONTEXTOPS_EMBEDDINGS_URL = "http://127.0.0.1:9/v1"
    settings.CONTEXTOPS_EMBEDDINGS_MODEL = ""
    with pytest.raises(EmbeddingError, match="needs CONTEXTOPS_EMBEDDINGS_MODEL"):
        embed_texts(["x"])


def test_a_failing_provider_gives_no_vector_and_a_warning(hosted, caplog):
    server = hosted("openai")
    server.script(Answer.status(500))
    with caplog.at_level(logging.WARNING, logger="contextops.embeddings"):
        assert vectors_for_storage(["kept", "anyway"]) == [None, None]
    assert "embeddings_backfill" in caplog.text and "answered 500" in caplog.text
    assert embed_query("still answered") is not None  # the next call succeeds


# --- the stored form -------------------------------------------------------------------------


def test_a_vector_is_stored_as_float16_bytes_and_read_back(settings):
    settings.CONTEXTOPS_EMBEDDINGS = "wordllama"
    vector = embed_texts(["budget approved for the Lyon office"])[0]
    blob = vector_for_storage("budget approved for the Lyon office")
    assert isinstance(blob, bytes) and len(blob) == 512
    assert blob == vector_to_bytes(vector)
    back = vector_from_bytes(memoryview(blob))
    assert back is not None and back.dtype == np.float32
    assert np.allclose(back, vector, atol=1e-3)
    assert vector_from_bytes(None) is None


def test_many_stored_vectors_are_read_at_once_with_a_mask():
    rows = np.eye(4, dtype=np.float32)[:3]
    blobs = [vector_to_bytes(rows[0]), None, memoryview(vector_to_bytes(rows[2])), b"\x00\x3c"]
    matrix, mask = vectors_from_bytes(blobs)
    assert matrix.shape == (4, 4) and matrix.dtype == np.float32
    assert mask.tolist() == [True, False, True, False]  # NULL, and another dimension
    assert np.array_equal(matrix[0], rows[0]) and np.array_equal(matrix[2], rows[2])
    assert not matrix[1].any() and not matrix[3].any()
    empty, none = vectors_from_bytes([None, None], dim=256)
    assert empty.shape == (2, 256) and not none.any()


def test_the_module_is_the_only_one_importing_wordllama():
    sources = [
        p
        for folder in ("contextops", "frames", "facts")
        for p in (ROOT / folder).rglob("*.py")
        if "import wordllama" in p.read_text() or "from wordllama" in p.read_text()
    ]
    assert sources == [ROOT / "contextops" / "embeddings.py"]
    assert embeddings.WORDLLAMA_DIM == 256
