"""The labelled pairs of tests/fixtures/conflict_pairs.json written through the real write
path, and what the proposals made of them: precision and recall of ``facts.conflicts``.

Each pair is written in a task scope of its own (so pairs never meet): ``a`` first, then
``b``; a proposal raised by ``b`` against ``a`` is a positive. Pairs labelled ``same``
(one entity, a changed value) should be proposed; ``alike`` and ``unrelated`` never.
"""

import json
from pathlib import Path
from typing import Any

from facts.conflicts import SIMILARITY_THRESHOLD
from facts.services import fact_write

PAIRS = Path(__file__).resolve().parents[1] / "fixtures" / "conflict_pairs.json"
TARGETS = {"precision": 0.9, "recall": 0.7}


def pairs() -> list[dict[str, Any]]:
    return json.loads(PAIRS.read_text())["pairs"]


def measure(organization, authority: str) -> dict[str, Any]:
    """Write every pair and count: the figures ``figures.conflicts`` holds."""
    counts = {"true_positive": 0, "false_positive": 0, "false_negative": 0, "true_negative": 0}
    by_label: dict[str, dict[str, int]] = {}
    misses: list[str] = []
    for index, pair in enumerate(pairs()):
        scope = {"scope": "task", "scope_id": f"pair-{index}", "authority": authority}
        for side in ("a", "b"):
            written = fact_write(
                organization=organization,
                key=f"{pair[side]['key']}__{index}",
                subject=pair[side]["key"],
                value=pair[side]["value"],
                source="user",
                **scope,
            )
        proposed = bool(written.conflicts)
        expected = pair["label"] == "same"
        label = by_label.setdefault(pair["label"], {"pairs": 0, "proposed": 0})
        label["pairs"] += 1
        label["proposed"] += int(proposed)
        outcome = {
            (True, True): "true_positive",
            (True, False): "false_positive",
            (False, True): "false_negative",
            (False, False): "true_negative",
        }[(proposed, expected)]
        counts[outcome] += 1
        if outcome in ("false_positive", "false_negative"):
            misses.append(f"{outcome}: {pair['a']['key']} / {pair['b']['key']}")
    tp, fp, fn = counts["true_positive"], counts["false_positive"], counts["false_negative"]
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    return {
        "pairs": sum(v["pairs"] for v in by_label.values()),
        "labels": by_label,
        **counts,
        "precision": round(precision, 3),
        "recall": round(recall, 3),
        "threshold": SIMILARITY_THRESHOLD,
        "targets": TARGETS,
        "meets_targets": precision >= TARGETS["precision"] and recall >= TARGETS["recall"],
        "misses": misses,
    }


def markdown(figures: dict[str, Any]) -> str:
    rows = "\n".join(
        f"| {label} | {v['pairs']} | {v['proposed']} |" for label, v in figures["labels"].items()
    )
    misses = "\n".join(f"- {m}" for m in figures["misses"]) or "- none"
    return f"""# Conflict proposals

`make bench-conflicts` writes the {figures["pairs"]} labelled pairs of
`tests/fixtures/conflict_pairs.json` through the fact write path (each pair in a task scope
of its own, under keys suffixed `__<n>` and subjects as labelled, with the default
wordllama vectors) and counts the proposed supersessions:
pairs labelled `same` (one entity, a changed value) should be proposed, `alike` (they only
look alike) and `unrelated` never. Similarity floor {figures["threshold"]}
(`facts.conflicts.SIMILARITY_THRESHOLD`).

| label | pairs | proposed |
|---|---|---|
{rows}

Precision **{figures["precision"]}** (target ≥ {figures["targets"]["precision"]}), recall
**{figures["recall"]}** (target ≥ {figures["targets"]["recall"]}). The set was written for
this and the words rule was tuned on it, so these figures are an upper bound for other
vocabularies; the misses:

{misses}
"""
