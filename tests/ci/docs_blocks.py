"""The shell and Python blocks of README.md and docs/agents.md, with their markers.

Each ```sh and ```python block a user would copy carries, on the line before it, one of:

- ``<!-- runnable -->``: tests/ci/test_documented_commands.py runs it against a live
  server, as written (``http://127.0.0.1:8000`` and ``cops_...`` stand for the server
  and the key; ``CONTEXTOPS_URL`` and ``CONTEXTOPS_API_KEY`` are set as the docs say);
- ``<!-- runnable with: NAME, ... -->``: the same, the test providing what the block
  assumes the reader has (``history``, ``SESSION_ID``, ...);
- ``<!-- not runnable: REASON -->``: why it cannot run in a test (it serves until
  stopped, installs into your environment, waits for a person), and where it is tested.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = (ROOT / "README.md", ROOT / "docs" / "agents.md")
LANGUAGES = ("sh", "python")
MARKER = re.compile(
    r"^<!--\s*(?:(?P<runnable>runnable)(?:\s+with:\s*(?P<given>[^>]*?))?"
    r"|not runnable:\s*(?P<reason>.*?))\s*-->$"
)
FENCE = re.compile(r"^```(?P<lang>\w*)\s*$")


@dataclass(frozen=True)
class Block:
    document: Path
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    marker: str  # the marker's line, "" when there is none
    runnable: bool
    given: tuple[str, ...]
    reason: str

    @property
    def where(self) -> str:
        return f"{self.document.relative_to(ROOT)}:{self.line}"


def blocks(document: Path) -> list[Block]:
    """The document's ```sh and ```python blocks in order, each with its marker."""
    lines = document.read_text().splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        language = fence["lang"]
        if language in LANGUAGES:
            before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            marker = MARKER.match(before.strip())
            given = (marker["given"] or "") if marker else ""
            out.append(
                Block(
                    document=document,
                    line=i + 1,
                    language=language,
                    code="\n".join(lines[i + 1 : end]) + "\n",
                    marker=before.strip() if marker else "",
                    runnable=bool(marker and marker["runnable"]),
                    given=tuple(n.strip() for n in given.split(",") if n.strip()),
                    reason=(marker["reason"] or "") if marker else "",
                )
            )
        i = end + 1
    return out


def all_blocks() -> list[Block]:
    return [block for document in DOCUMENTS for block in blocks(document)]
