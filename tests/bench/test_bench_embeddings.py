"""What embedding on write costs: a handle added and a fact written through the API,
with the default model (``wordllama``) and with embeddings off, interleaved so both
meet the same machine; and one short text embedded alone.

Each fact's key is one word of its own ("factwordllama12"): facts that share an entity
word and say nearly the same thing are what a write's conflict review proposes (and its
own benchmark measures, docs/benchmarks-conflicts.md); with keys sharing a word, every
write would be compared with the 200 before it and propose them all, which is not the
cost of a vector.

Writes docs/benchmarks-embeddings-<database>.md and records ``embedding_write``: each
write's p50 without and with its vector and their ratio (the target is 1.3 at most).
Runs only with ``--bench`` (``make bench``); asserts no timing.
"""

import statistics
import time

import pytest
from django.test import override_settings

from contextops.embeddings import embed_texts
from frames.services.sessions import session_create
from frames.services.stack import frame_push
from tests.bench.report import database_vendor, record, write_section

ROUNDS = 300
TEXT = (
    "The customer asked to move the quarterly review to Thursday afternoon, after the budget call"
)


def _p50_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 3)


@pytest.mark.django_db
def test_bench_embeddings(api, settings):
    settings.CONTEXTOPS_RATE_LIMIT_PER_MINUTE = 0
    settings.CONTEXTOPS_EMBEDDINGS = "wordllama"
    session = session_create(organization=api.organization, identity={"user_name": "A"})
    frame = frame_push(session=session, goal="bench", budget_total=10**9)
    embed_texts(["load the model before measuring"])
    samples: dict[str, dict[str, list[float]]] = {
        "handle": {"none": [], "wordllama": []},
        "fact": {"none": [], "wordllama": []},
    }
    alone: list[float] = []
    for i in range(ROUNDS):
        for mode in ("none", "wordllama") if i % 2 else ("wordllama", "none"):
            with override_settings(CONTEXTOPS_EMBEDDINGS=mode):
                started = time.perf_counter()
                response = api.post(
                    f"/frames/{frame.id}/handles", {"kind": "message", "content": f"{TEXT} ({i})"}
                )
                samples["handle"][mode].append(time.perf_counter() - started)
                assert response.status_code == 201, response.content[:300]
                started = time.perf_counter()
                response = api.post(
                    "/facts", {"key": f"fact{mode}{i}", "value": f"{TEXT} ({i})", "source": "user"}
                )
                samples["fact"][mode].append(time.perf_counter() - started)
                assert response.status_code == 201, response.content[:300]
        started = time.perf_counter()
        embed_texts([f"{TEXT} ({i})"])
        alone.append(time.perf_counter() - started)

    figures: dict[str, float] = {"embed_one_text_p50_ms": _p50_ms(alone)}
    lines = [
        "## Embedding on write",
        "",
        f"{ROUNDS} writes of each kind through the API with the default model (`wordllama`) "
        "and as many with `CONTEXTOPS_EMBEDDINGS=none`, interleaved; the text is one "
        f"sentence of {len(TEXT.split())} words.",
        "",
        "| write | p50 without a vector (ms) | p50 with its vector (ms) | ratio |",
        "| --- | ---: | ---: | ---: |",
    ]
    for kind, label in (("handle", "handle added"), ("fact", "fact written")):
        without, with_vector = (_p50_ms(samples[kind][m]) for m in ("none", "wordllama"))
        ratio = round(with_vector / without, 3)
        figures.update(
            {f"{kind}_p50_ms_without": without, f"{kind}_p50_ms_with": with_vector}
            | {f"{kind}_ratio": ratio}
        )
        lines.append(f"| {label} | {without} | {with_vector} | {ratio} |")
    lines += ["", f"One text embedded alone: p50 {figures['embed_one_text_p50_ms']} ms."]
    report = "\n".join(lines)
    print("\n" + report)
    write_section(f"embeddings-{database_vendor()}", report)
    record({"embedding_write": figures})
