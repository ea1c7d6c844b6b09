"""Figures of a hardening run, for docs/reliability.md: printed, and kept as JSON in CI."""

import json
import os
from pathlib import Path


def figures_record(name: str, figures: dict) -> None:
    """Print ``figures`` and, when ``CONTEXTOPS_ARTIFACTS`` is set, write them to
    ``$CONTEXTOPS_ARTIFACTS/hardening/<name>.json`` (replacing an earlier run's)."""
    text = json.dumps(figures, sort_keys=True, default=str)
    print(f"\nfigures {name}: {text}")
    folder = os.environ.get("CONTEXTOPS_ARTIFACTS")
    if folder:
        path = Path(folder) / "hardening" / f"{name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(figures, indent=2, sort_keys=True, default=str) + "\n")
