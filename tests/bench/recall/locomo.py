"""LoCoMo conversations as the recall benchmark reads them: turns, observations and the
questions whose evidence turns are marked.

The data is CC BY-NC 4.0, for evaluation only: it is read from ``LOCOMO_PATH`` and never
copied into the repository. Nothing here needs Django.

Shape (see ../shared/fixtures/locomo/PROVENANCE.md): a list of samples, each with
``conversation`` (``session_N``: turns ``{speaker, dia_id, text, blip_caption?}``),
``observation`` (``session_N_observation``: per speaker ``[text, dia_id]``, where the
dia_id is sometimes a list of ids) and ``qa`` (``{question, evidence, category}``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
ENV_VAR = "LOCOMO_PATH"
DEFAULT_PATH = ROOT.parent / "shared" / "fixtures" / "locomo" / "locomo-dev.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
_SEPARATORS = re.compile(r"[;,\s]+")
_SESSION = re.compile(r"session_(\d+)")


class DataMissing(Exception):
    """The LoCoMo file is not where ``LOCOMO_PATH`` (or the default) says, or unreadable."""


@dataclass(frozen=True)
class Turn:
    session: int
    dia_id: str
    speaker: str
    text: str
    caption: str = ""

    @property
    def content(self) -> str:
        """What the handle holds: ``speaker: text``, and the photo's caption when shared."""
        shared = f" [shares a photo: {self.caption}]" if self.caption else ""
        return f"{self.speaker}: {self.text}{shared}"


@dataclass(frozen=True)
class Observation:
    session: int
    speaker: str
    text: str
    dia_ids: tuple[str, ...]


@dataclass(frozen=True)
class Question:
    index: int  # its place in the sample's ``qa`` list
    text: str
    category: int
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    turns: tuple[Turn, ...]
    observations: tuple[Observation, ...]
    questions: tuple[Question, ...]
    # Questions of categories 1-4 left out because none of their evidence ids exists.
    without_evidence: int = 0


def data_path(environ: Mapping[str, str] | None = None) -> Path:
    """``LOCOMO_PATH`` when set, else the shared development file beside the repository."""
    value = (os.environ if environ is None else environ).get(ENV_VAR, "").strip()
    return Path(value).expanduser() if value else DEFAULT_PATH


def split_ids(entries: Iterable[Any]) -> list[str]:
    """Every id named by ``entries``, split on ``;``, ``,`` and spaces ("D8:6; D9:17"),
    in order; entries that are not strings (or lists of them) name nothing."""
    ids: list[str] = []
    for entry in entries:
        if isinstance(entry, list | tuple):
            ids += split_ids(entry)
        elif isinstance(entry, str):
            ids += [part for part in _SEPARATORS.split(entry) if part]
    return ids


def evidence_ids(entries: Iterable[Any], known: Mapping[str, Any] | set[str]) -> tuple[str, ...]:
    """The distinct ids of ``entries`` that name a turn in ``known``, in order. Unknown
    ids ("D", "D:11:26") are left out, so an empty answer means no evidence to find."""
    seen: dict[str, None] = {}
    for part in split_ids(entries):
        if part in known:
            seen.setdefault(part, None)
    return tuple(seen)


def _sessions(block: Mapping[str, Any], suffix: str = "") -> list[tuple[int, Any]]:
    """The ``session_N<suffix>`` entries of ``block``, in session order."""
    found = []
    for name, value in block.items():
        match = _SESSION.fullmatch(name.removesuffix(suffix)) if name.endswith(suffix) else None
        if match:
            found.append((int(match.group(1)), value))
    return sorted(found, key=lambda pair: pair[0])


def parse_sample(sample: Mapping[str, Any]) -> Conversation:
    """One LoCoMo sample: its turns in conversation order, its observations (each with the
    turns it came from), its questions of categories 1-4 that have evidence to find."""
    turns = tuple(
        Turn(
            session=number,
            dia_id=str(turn["dia_id"]),
            speaker=str(turn["speaker"]),
            text=str(turn["text"]),
            caption=str(turn.get("blip_caption") or ""),
        )
        for number, session in _sessions(sample["conversation"])
        if isinstance(session, list)
        for turn in session
    )
    known = {turn.dia_id for turn in turns}
    observations = []
    for number, session in _sessions(sample.get("observation") or {}, "_observation"):
        for speaker, entries in session.items():
            for entry in entries:
                if not (isinstance(entry, list | tuple) and len(entry) == 2):
                    continue
                ids = evidence_ids([entry[1]], known)
                if ids:
                    observations.append(Observation(number, str(speaker), str(entry[0]), ids))
    questions, without_evidence = [], 0
    for index, qa in enumerate(sample.get("qa") or []):
        if qa.get("category") not in CATEGORIES:
            continue
        evidence = evidence_ids(qa.get("evidence") or [], known)
        if not evidence:
            without_evidence += 1
            continue
        questions.append(Question(index, str(qa["question"]), int(qa["category"]), evidence))
    return Conversation(
        sample_id=str(sample.get("sample_id") or f"sample-{id(sample)}"),
        turns=turns,
        observations=tuple(observations),
        questions=tuple(questions),
        without_evidence=without_evidence,
    )


def load(path: Path | None = None, limit: int | None = None) -> list[Conversation]:
    """The first ``limit`` conversations (all when None) of the file at ``path``
    (``data_path()`` by default). Raises DataMissing, naming LOCOMO_PATH, when the file
    is absent or is not LoCoMo's JSON."""
    path = path or data_path()
    hint = (
        f"Set {ENV_VAR} to the LoCoMo development file (default {DEFAULT_PATH}); "
        "see ../shared/fixtures/locomo/PROVENANCE.md."
    )
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataMissing(f"No LoCoMo data at {path} ({ENV_VAR}). {hint}") from None
    except (OSError, ValueError) as exc:
        raise DataMissing(f"Cannot read LoCoMo data at {path} ({ENV_VAR}): {exc}. {hint}") from None
    if not isinstance(raw, list) or not all(
        isinstance(s, dict) and "conversation" in s for s in raw
    ):
        raise DataMissing(
            f"{path} ({ENV_VAR}) is not LoCoMo data: a list of samples with a conversation. {hint}"
        )
    samples = raw if limit is None else raw[:limit]
    return [parse_sample(sample) for sample in samples]
