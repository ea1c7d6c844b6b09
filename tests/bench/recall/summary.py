"""The recall benchmark's figures: averages per load mode, budget and category, the
issue's targets checked against them, the markdown table and the JSON figures."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .baselines import BASELINES
from .locomo import CATEGORIES

MODES = ("handles", "facts", "both", "documents")
# The modes the targets speak of (``documents`` is reported, with no target).
TARGET_MODES = ("handles", "facts", "both")
METHODS = ("pack", *BASELINES)
# ``documents`` only: the hybrid over the documents cut into passages of whole turns.
PASSAGES = "passages"
# Recall with everything loaded in the context: what no budget can exceed (observations
# do not cover every evidence turn, so facts alone stay below 1).
CEILING = "everything"
# The pack's recall counting only items shown whole: a turn cut to fit, or replaced by a
# summary, may have lost the words the question needs.
WHOLE = "pack_whole"
HANDLES_MARGIN = 0.03
USE_TARGET = 0.90
# Recalls are means of fractions: equal figures may differ in the last bits.
TOLERANCE = 1e-9
LABELS = {
    "pack": "contextops pack",
    "newest": "newest first",
    "bm25": "BM25",
    "hybrid": "BM25 + wordllama, reciprocal rank fusion",
    PASSAGES: "BM25 + wordllama over passages of whole turns (at most 128 tokens)",
    WHOLE: "contextops pack, items shown whole only",
    CEILING: "everything loaded (no budget: the ceiling)",
}
MODE_TITLES = {
    "handles": "Turns as `message` handles of one frame",
    "facts": "Observations as facts (no handles); baselines given the tokens the pack spent on facts",
    "both": "Turns as handles and observations as facts in one session (evidence found through either)",
    "documents": (
        "Each session as one `document` handle (about 300 to 1,600 tokens); a turn counts as found "
        "when its whole line is in the context"
    ),
}
PROVENANCE = (
    'LoCoMo (Maharana et al., "Evaluating Very Long-Term Conversational Memory of LLM '
    'Agents", ACL 2024; github.com/snap-research/LoCoMo, `data/locomo10.json` at commit '
    "3eb6f2c), its development conversations, licensed CC BY-NC 4.0: read from "
    "`LOCOMO_PATH` for evaluation only, never copied into this repository"
)


@dataclass(frozen=True)
class Outcome:
    """One question at one budget in one load mode: every method's recall, and what the
    pack used."""

    sample_id: str
    question: int
    category: int
    mode: str
    budget: int
    used: int
    room: int
    recall: dict[str, float]


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _figures(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """Mean recall of every method over ``outcomes``, pack − hybrid, and the pack's use."""
    figures: dict[str, Any] = {"questions": len(outcomes)}
    for method in (*METHODS, WHOLE, CEILING):
        figures[method] = _mean([o.recall.get(method, 0.0) for o in outcomes])
    if outcomes and all(PASSAGES in o.recall for o in outcomes):
        figures[PASSAGES] = _mean([o.recall[PASSAGES] for o in outcomes])
        figures["pack_minus_passages"] = figures["pack"] - figures[PASSAGES]
    if outcomes:
        figures["pack_minus_hybrid"] = figures["pack"] - figures["hybrid"]
        figures["used_share"] = _mean([o.used / o.budget for o in outcomes])
        figures["baseline_room_share"] = _mean([o.room / o.budget for o in outcomes])
    return figures


def summarize(
    outcomes: Sequence[Outcome], *, budgets: Sequence[int], modes: Sequence[str] = MODES
) -> dict[str, Any]:
    """``{mode: {budget: figures + {"categories": {category: figures}}}}`` (budgets and
    categories as strings, the JSON's keys)."""
    table: dict[str, Any] = {}
    for mode in modes:
        table[mode] = {}
        for budget in budgets:
            chosen = [o for o in outcomes if o.mode == mode and o.budget == budget]
            figures = _figures(chosen)
            figures["categories"] = {
                str(category): {
                    "name": name,
                    **_figures([o for o in chosen if o.category == category]),
                }
                for category, name in CATEGORIES.items()
            }
            table[mode][str(budget)] = figures
    return table


def _verdict(target: str, value: float | None, floor: float | None, detail: str) -> dict[str, Any]:
    """Met when ``value`` ≥ ``floor``; None (not measured) when either is missing."""
    if value is None or floor is None:
        return {"target": target, "met": None, "detail": "not measured"}
    return {"target": target, "met": value >= floor - TOLERANCE, "detail": detail}


def targets(table: Mapping[str, Any], budgets: Sequence[int]) -> list[dict[str, Any]]:
    """The issue's "Done means" lines for ``make bench-recall``, each met, not met, or not
    measured (``met`` None: a load mode it needs was not run)."""

    def figure(mode: str, budget: int, name: str) -> float | None:
        value = table.get(mode, {}).get(str(budget), {}).get(name)
        return value if isinstance(value, int | float) else None

    verdicts = []
    for budget in budgets:
        pack, hybrid = figure("handles", budget, "pack"), figure("handles", budget, "hybrid")
        floor = None if hybrid is None else hybrid + HANDLES_MARGIN
        verdicts.append(
            _verdict(
                f"handles at {budget:,} tokens: pack ≥ hybrid + {HANDLES_MARGIN}",
                pack,
                floor,
                f"pack {pack or 0:.3f}, hybrid {hybrid or 0:.3f} + {HANDLES_MARGIN} = {floor or 0:.3f}",
            )
        )
    for budget in budgets:
        pack, hybrid = figure("facts", budget, "pack"), figure("facts", budget, "hybrid")
        verdicts.append(
            _verdict(
                f"facts at {budget:,} tokens: pack ≥ hybrid over the same facts",
                pack,
                hybrid,
                f"pack {pack or 0:.3f}, hybrid {hybrid or 0:.3f}",
            )
        )
    for budget in budgets:
        both = figure("both", budget, "pack")
        handles, facts = figure("handles", budget, "pack"), figure("facts", budget, "pack")
        verdicts.append(
            _verdict(
                f"both at {budget:,} tokens: pack ≥ the better of handles alone and facts alone",
                both,
                None if handles is None or facts is None else max(handles, facts),
                f"both {both or 0:.3f}, handles {handles or 0:.3f}, facts {facts or 0:.3f}",
            )
        )
    for mode in TARGET_MODES:
        shares = {budget: figure(mode, budget, "used_share") for budget in budgets}
        known = {budget: share for budget, share in shares.items() if share is not None}
        average = _mean(list(known.values()))
        verdicts.append(
            _verdict(
                f"{mode}: the pack uses ≥ {USE_TARGET:.0%} of its budget on average",
                average,
                USE_TARGET,
                f"average {average or 0:.1%} ("
                + ", ".join(f"{budget:,}: {share:.1%}" for budget, share in known.items())
                + ")",
            )
        )
    return verdicts


def verdict_line(verdict: Mapping[str, Any]) -> str:
    state = {True: "met", False: "NOT MET", None: "not measured"}[verdict["met"]]
    return f"[{state}] {verdict['target']}: {verdict['detail']}"


def _cell(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _signed(value: float | None) -> str:
    return "–" if value is None else f"{value:+.2f}"


def markdown(document: Mapping[str, Any]) -> str:
    """The readable table of ``document`` (the JSON figures), a section of
    docs/benchmarks.md."""
    budgets = document["budgets"]
    table = document["modes"]
    state = "with uncommitted changes" if document["dirty"] else "clean"
    lines = [
        f"## Retrieval recall on LoCoMo ({document['database']})",
        "",
        f"`make bench-recall` (tests/bench/recall). Data: {PROVENANCE}; file sha256 "
        f"`{document['data']['sha256'][:16]}`, conversations {', '.join(document['data']['conversations'])}.",
        f"Commit `{document['commit']}` ({state}), {document['database']}, "
        f"{document['questions']} questions of categories 1–4 "
        f"({document['questions_without_evidence']} left out: no evidence turn that exists), "
        f"{document['packs']:,} packs, {document['wall_seconds']:.0f} s in all.",
        "",
        "Recall: the share of a question's evidence turns that the context holds (a segment of "
        "the turn's handle, or a fact of an observation that came from it), averaged over the "
        "questions; every question is the pack's `query`. The baselines rank the same texts "
        "(the handle's content; a fact as `key: value`) and fill greedily with the API's own "
        "token counts, skipping an item that does not fit: for handles the pack's budget less "
        "its brief and breadcrumbs, for facts exactly the tokens the pack spent on facts. "
        "BM25 is rank_bm25's Okapi over lowercase words; the hybrid fuses the BM25 ranking of "
        "the items sharing a word with the question and the wordllama cosine ranking of all "
        "items (reciprocal rank fusion, k = 60).",
    ]
    for mode, by_budget in table.items():
        head = " | ".join(f"{budget:,} tokens" for budget in budgets)
        lines += [
            "",
            f"### {MODE_TITLES[mode]}",
            "",
            f"| what chose the context | {head} |",
            "| --- |" + " ---: |" * len(budgets),
        ]
        cut = all(PASSAGES in by_budget[str(b)] for b in budgets)
        for method in (METHODS[0], WHOLE, *METHODS[1:], *([PASSAGES] if cut else []), CEILING):
            cells = " | ".join(_cell(by_budget[str(b)][method]) for b in budgets)
            lines.append(f"| {LABELS[method]} | {cells} |")
        cells = " | ".join(_signed(by_budget[str(b)].get("pack_minus_hybrid")) for b in budgets)
        lines.append(f"| pack − hybrid | {cells} |")
        if cut:
            cells = " | ".join(_signed(by_budget[str(b)]["pack_minus_passages"]) for b in budgets)
            lines.append(f"| pack − passages | {cells} |")
        cells = " | ".join(f"{by_budget[str(b)].get('used_share', 0):.0%}" for b in budgets)
        lines.append(f"| pack's use of its budget | {cells} |")
        lines += [
            "",
            "| category | questions | budget | pack | newest | BM25 | hybrid | pack − hybrid |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for category, name in CATEGORIES.items():
            for budget in budgets:
                row = by_budget[str(budget)]["categories"][str(category)]
                if not row["questions"]:
                    continue
                cells = " | ".join(_cell(row[m]) for m in METHODS)
                lines.append(
                    f"| {category} {name} | {row['questions']} | {budget:,} | {cells} | "
                    f"{_signed(row.get('pack_minus_hybrid'))} |"
                )
    lines += ["", "### Targets (issue 32, reported, never asserted)", ""]
    lines += [f"- {verdict_line(verdict)}" for verdict in document["targets"]]
    return "\n".join(lines)
