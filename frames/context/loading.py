"""Loading a resource a handle refers to (docs/concepts.md#resources).

Only ``file:`` refs under ``settings.CONTEXTOPS_RESOURCE_ROOTS`` are loaded by the
server (``file:relative/path`` under the first root, or ``file:///absolute/path`` inside
one); any other ref is opaque: its content is whatever the agent sent. Nothing here
reaches the network.
"""

from pathlib import Path

from django.conf import settings

FILE_SCHEME = "file:"
MAX_LOAD_BYTES = 1_000_000


class LoadError(Exception):
    """The resource could not be read: missing, unreadable, outside the roots, too large."""


def _roots() -> list[Path]:
    return [Path(r).resolve() for r in getattr(settings, "CONTEXTOPS_RESOURCE_ROOTS", []) if r]


def resource_loadable(ref: str) -> bool:
    """True when ``ref`` is one the server loads itself (a ``file:`` ref, roots set)."""
    return bool(ref) and ref.startswith(FILE_SCHEME) and bool(_roots())


def _path(ref: str) -> Path:
    roots = _roots()
    raw = ref[len(FILE_SCHEME) :]
    if raw.startswith("//"):
        raw = raw[2:]
    path = Path(raw)
    resolved = (path if path.is_absolute() else roots[0] / path).resolve()
    if not any(resolved == root or root in resolved.parents for root in roots):
        raise LoadError(f"{ref} is outside the resource roots")
    return resolved


def resource_load(ref: str) -> str:
    """The text of ``ref``; LoadError when it cannot be read (see the module docstring)."""
    if not resource_loadable(ref):
        raise LoadError(f"{ref} is not a resource the server can load")
    path = _path(ref)
    try:
        if path.stat().st_size > MAX_LOAD_BYTES:
            raise LoadError(f"{ref} is larger than {MAX_LOAD_BYTES:,} bytes")
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise LoadError(f"{ref}: {exc.strerror or exc}") from exc


def resource_reachable(ref: str) -> bool:
    """True when ``ref`` can be read now (for a ref the server loads)."""
    try:
        path = _path(ref)
    except LoadError:
        return False
    return path.is_file()
