"""Sending transcripts to ``POST /imports``, and ``contextops claude-hook``, which sends a
Claude Code session while it happens.

A transcript is sent as its file's bytes from an ``offset`` on. A Claude Code transcript
(JSONL) is sent in whole lines only (a last line still being written waits for the next
call), in requests that stay under the server's body limit, with the files of its
``subagents/`` folder beside it, each at its own offset. The server holds what it was
sent; when an offset is not where it expects (409 ``import_offset_mismatch``), the
sender starts again from the ``expected_offset`` it answers.

The hook, in Claude Code's ``settings.json`` (``~/.claude/settings.json`` or the
project's ``.claude/settings.json``)::

    {
      "env": {"CONTEXTOPS_URL": "http://127.0.0.1:8000", "CONTEXTOPS_API_KEY": "cops_..."},
      "hooks": {
        "SessionStart": [{"hooks": [{"type": "command", "command": "contextops claude-hook"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "contextops claude-hook"}]}],
        "SubagentStop": [{"hooks": [{"type": "command", "command": "contextops claude-hook"}]}],
        "PreCompact": [{"hooks": [{"type": "command", "command": "contextops claude-hook"}]}],
        "SessionEnd": [{"hooks": [{"type": "command", "command": "contextops claude-hook"}]}]
      }
    }

Each call reads the hook's JSON on stdin (``session_id``, ``transcript_path``,
``hook_event_name``), sends what was appended since its last call and remembers how far
it got per session and per file in ``$CONTEXTOPS_HOOK_STATE`` (default
``~/.contextops/hooks/``), one small JSON file per session, replaced atomically. Only
``SessionEnd`` sends ``final: true`` (the session ends once imported). It never holds
Claude Code up for long: two-second requests, five seconds in all
(``$CONTEXTOPS_HOOK_TIMEOUT``); what is left goes with the next call, and what
``SessionEnd`` leaves, after which nothing calls again, goes on in a detached process.
It never fails Claude Code either: it prints nothing (``SessionStart``'s output would
go into Claude's context), writes one line per call to ``$CONTEXTOPS_HOOK_LOG`` (default
``~/.contextops/hook.log``), errors included, and exits 0.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .errors import ContextopsError, TooLarge
from .sync import Client
from .types import ImportQueued

try:  # POSIX: hook calls of one session take turns; elsewhere they simply do not wait
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

CLAUDE_CODE = "claude_code"
# The JSON-escaped content one request carries at most: well under the server's default
# 2 MiB body limit. A 413 answer halves it.
CHUNK_BYTES = 1024 * 1024
MIN_CHUNK_BYTES = 16 * 1024
MAX_RESENDS = 4

HOOK_EVENTS = frozenset({"SessionStart", "Stop", "SubagentStop", "PreCompact", "SessionEnd"})
FINAL_EVENT = "SessionEnd"
HOOK_REQUEST_TIMEOUT = 2.0
HOOK_DEADLINE = 5.0  # seconds for one call in all ($CONTEXTOPS_HOOK_TIMEOUT); the rest waits
HOOK_ALARM_MARGIN = 10  # an alarm this long past the budget: a last resort against a hang
BACKGROUND_DEADLINE = 300.0  # what SessionEnd could not send in time, sent detached
BACKGROUND_REQUEST_TIMEOUT = 30.0
LOG_MAX_BYTES = 1024 * 1024


class OffsetMismatch(ContextopsError):
    """The server holds another amount of a file than the sender thought, after resending."""

    status, code = 409, "import_offset_mismatch"


# -- what is sent --------------------------------------------------------------------------


@dataclass
class Source:
    """One transcript file as the server holds it: ``offset`` bytes of it are sent.

    ``end`` is where its last whole line ends (fixed when the source is made, so lines
    written while a call runs wait for the next one); with ``whole_lines=False`` the
    whole file is one piece (a JSON or YAML document).
    """

    path: Path
    file_name: str
    offset: int = 0
    whole_lines: bool = True
    end: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self.end = self._end()
        if self.offset > self.end:  # the file was replaced or cut: the server says where
            self.offset = 0

    def _end(self) -> int:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return 0
        if not self.whole_lines or size == 0:
            return size
        with self.path.open("rb") as handle:
            position = size
            while position > 0:
                step = min(64 * 1024, position)
                handle.seek(position - step)
                block = handle.read(step)
                newline = block.rfind(b"\n")
                if newline >= 0:
                    return position - step + newline + 1
                position -= step
        return 0

    @property
    def pending(self) -> int:
        return max(0, self.end - self.offset)

    def take(self, room: int) -> bytes:
        """The unsent bytes from ``offset``: whole lines whose escaped JSON fits in
        ``room`` (at least one line, so a long line still goes), or the whole rest for a
        document. Does not move ``offset``."""
        if self.pending == 0:
            return b""
        with self.path.open("rb") as handle:
            handle.seek(self.offset)
            if not self.whole_lines:
                return handle.read(self.pending)
            taken: list[bytes] = []
            used = 0
            left = self.pending
            while left > 0:
                line = handle.readline(left)
                if not line:
                    break
                left -= len(line)
                size = _escaped_size(line)
                if taken and used + size > room:
                    break
                taken.append(line)
                used += size
                if used >= room:
                    break
            return b"".join(taken)


def _escaped_size(data: bytes) -> int:
    """Bytes ``data`` takes as a JSON string in a request body (quotes and escapes)."""
    return len(json.dumps(data.decode("utf-8", errors="replace"), ensure_ascii=False).encode())


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def claude_code_sources(transcript: Path, offsets: dict[str, int] | None = None) -> list[Source]:
    """The transcript and the ``<session>/subagents/agent-*.jsonl`` files beside it, the
    main one first, each at its offset in ``offsets`` (by file name)."""
    offsets = offsets or {}
    sources = [Source(transcript, transcript.name, offsets.get(transcript.name, 0))]
    folder = transcript.with_suffix("") / "subagents"
    if folder.is_dir():
        for sub in sorted(folder.glob("agent-*.jsonl")):
            sources.append(Source(sub, sub.name, offsets.get(sub.name, 0)))
    return sources


@dataclass
class Uploaded:
    """What :func:`upload` did: the jobs queued, in order, and whether nothing is left."""

    jobs: list[ImportQueued]
    complete: bool


def upload(
    ops: Client,
    sources: list[Source],
    *,
    format: str | None = None,
    final: bool = True,
    title: str | None = None,
    chunk_bytes: int = CHUNK_BYTES,
    deadline: float | None = None,
    after_each: Any = None,
) -> Uploaded:
    """Send what the server lacks of ``sources`` (the transcript first, then Claude Code
    subagent files) through ``POST /imports``; return the jobs it queued, in order, and
    whether everything was sent (``complete``: False when the deadline cut it short).

    Requests stay under ``chunk_bytes`` of content where lines allow; only the last one
    carries ``final``. Nothing pending and not ``final`` sends nothing; a ``final`` with
    nothing new still tells the server the transcript is complete. After each accepted
    request the sources' offsets have moved and ``after_each(sources)`` is called (the
    hook saves them there). With a ``deadline`` (``time.monotonic()``) no further request
    starts once it passed. Raises the API's errors; :class:`OffsetMismatch` when the
    server keeps naming another offset.
    """
    main, subagents = sources[0], sources[1:]
    answers: list[ImportQueued] = []
    resends = 0
    while True:
        if deadline is not None and time.monotonic() >= deadline:
            return Uploaded(answers, complete=False)
        room = chunk_bytes
        main_part = main.take(room)
        room -= _escaped_size(main_part)
        parts = []
        for sub in subagents:
            piece = sub.take(room) if room > 0 else b""
            if piece:
                parts.append((sub, piece))
                room -= _escaped_size(piece)
        taken = {id(sub): len(piece) for sub, piece in parts}
        more = main.pending > len(main_part) or any(
            sub.pending > taken.get(id(sub), 0) for sub in subagents
        )
        if not main_part and not parts and (not final or answers):
            return Uploaded(answers, complete=True)
        try:
            answer = ops.import_create(
                main.file_name,
                _text(main_part),
                offset=main.offset,
                format=format,
                final=final and not more,
                subagents=[
                    {"file_name": sub.file_name, "content": _text(piece), "offset": sub.offset}
                    for sub, piece in parts
                ],
                title=title,
            )
        except TooLarge:
            if chunk_bytes <= MIN_CHUNK_BYTES or not main.whole_lines:
                raise
            chunk_bytes //= 2
            continue
        except ContextopsError as exc:
            if exc.code != "import_offset_mismatch" or resends >= MAX_RESENDS:
                if exc.code == "import_offset_mismatch":
                    raise OffsetMismatch(exc.detail, status=exc.status, body=exc.body) from exc
                raise
            resends += 1
            _rewind(sources, exc.body)
            continue
        main.offset += len(main_part)
        for sub, piece in parts:
            sub.offset += len(piece)
        answers.append(answer)
        if after_each is not None:
            after_each(sources)
        if not more:
            return Uploaded(answers, complete=True)


def _rewind(sources: list[Source], body: dict[str, Any]) -> None:
    """Move the file the server named (the transcript when it names none) to the offset it
    holds; an offset past what the file has is beyond repair here and raises."""
    expected = body.get("expected_offset")
    if not isinstance(expected, int) or expected < 0:
        raise OffsetMismatch(str(body.get("detail") or "offset mismatch"), status=409, body=body)
    named = body.get("file_name")
    source = next((s for s in sources if named and s.file_name == named), sources[0])
    if expected > source.end:
        raise OffsetMismatch(
            f"The server holds {expected} bytes of {source.file_name}, which has "
            f"{source.end} in whole lines.",
            status=409,
            body=body,
        )
    source.offset = expected


# -- the hook ------------------------------------------------------------------------------


def _home() -> Path:
    return Path(os.environ.get("HOME") or Path.home())


def state_dir() -> Path:
    value = os.environ.get("CONTEXTOPS_HOOK_STATE")
    return Path(value).expanduser() if value else _home() / ".contextops" / "hooks"


def log_path() -> Path:
    value = os.environ.get("CONTEXTOPS_HOOK_LOG")
    return Path(value).expanduser() if value else _home() / ".contextops" / "hook.log"


def log(message: str) -> None:
    """Append one line to the hook's log (kept under a megabyte: the older half moves to
    ``hook.log.1``); a log that cannot be written is given up on, quietly."""
    try:
        path = log_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and path.stat().st_size > LOG_MAX_BYTES:
            os.replace(path, path.with_name(path.name + ".1"))
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        with path.open("a", encoding="utf-8") as handle:
            handle.write(f"{stamp} {message}\n")
    except OSError:
        pass


def _state_file(session_id: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", session_id)[:200] or "session"
    return state_dir() / f"{safe}.json"


def load_state(session_id: str) -> dict[str, Any]:
    """``{"transcript": path, "offsets": {file name: bytes sent}}`` of a session; empty
    when there is none yet (or it cannot be read: the server then says what it holds)."""
    try:
        data = json.loads(_state_file(session_id).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save_state(session_id: str, state: dict[str, Any]) -> None:
    """Write the state file whole or not at all: a temporary file, then a rename."""
    path = _state_file(session_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".state-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(state, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


@contextmanager
def _session_lock(session_id: str, deadline: float) -> Iterator[bool]:
    """Hook calls of one session one at a time (a SubagentStop and a Stop may overlap).
    Yields False when the lock was not had by ``deadline``."""
    if fcntl is None:
        yield True
        return
    path = _state_file(session_id).with_suffix(".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(0.05)
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _budget() -> float:
    """Seconds one call may take in all: ``$CONTEXTOPS_HOOK_TIMEOUT``, else five."""
    try:
        return max(0.0, float(os.environ.get("CONTEXTOPS_HOOK_TIMEOUT") or HOOK_DEADLINE))
    except ValueError:
        return HOOK_DEADLINE


class _Overdue(Exception):
    pass


def _overdue(signum: int, frame: Any) -> None:
    raise _Overdue("the hook ran past its time")


def _alarm(seconds: int) -> Any:
    """Interrupt this process after ``seconds`` (POSIX, main thread); the handler it
    replaced, to put back, or None when no alarm is set."""
    if not hasattr(signal, "SIGALRM"):
        return None
    try:
        previous = signal.signal(signal.SIGALRM, _overdue)
    except ValueError:  # not the main thread (a test runner): the timeouts still hold
        return None
    signal.alarm(seconds)
    return previous


@dataclass
class HookOutcome:
    """One hook call: the line the log gets, and whether anything is left to send."""

    message: str
    complete: bool = True


def hook_run(
    payload: dict[str, Any],
    *,
    url: str | None = None,
    api_key: str | None = None,
    deadline_seconds: float = HOOK_DEADLINE,
    request_timeout: float = HOOK_REQUEST_TIMEOUT,
) -> HookOutcome:
    """Send what Claude Code appended to the session ``payload`` names. Raises on
    anything that went wrong (:func:`hook_main` logs it)."""
    deadline = time.monotonic() + deadline_seconds
    event = str(payload.get("hook_event_name") or "")
    session_id = str(payload.get("session_id") or "")
    transcript = payload.get("transcript_path")
    if not session_id or not isinstance(transcript, str) or not transcript:
        raise ValueError("no session_id or transcript_path in the hook's input")
    path = Path(transcript).expanduser()
    final = event == FINAL_EVENT
    api_key = api_key if api_key is not None else os.environ.get("CONTEXTOPS_API_KEY", "")
    if not api_key:
        raise ValueError("CONTEXTOPS_API_KEY is not set: nothing can be sent")
    with _session_lock(session_id, deadline) as locked:
        if not locked:
            raise TimeoutError("another hook call of this session held its lock too long")
        state = load_state(session_id)
        held = state.get("offsets") if state.get("transcript") == str(path) else None
        offsets: dict[str, int] = {
            str(name): sent
            for name, sent in (held.items() if isinstance(held, dict) else ())
            if isinstance(sent, int) and sent >= 0
        }
        sources = claude_code_sources(path, offsets)
        extra = payload.get("agent_transcript_path")
        if isinstance(extra, str) and extra:
            sub = Path(extra).expanduser()
            if sub.is_file() and all(s.path != sub for s in sources):
                sources.append(Source(sub, sub.name, offsets.get(sub.name, 0)))
        if not path.is_file() and not final:
            return HookOutcome(f"{event} {session_id}: no transcript yet")

        def remember(sent: list[Source]) -> None:
            save_state(
                session_id,
                {"transcript": str(path), "offsets": {s.file_name: s.offset for s in sent}},
            )

        before = sum(s.offset for s in sources)
        timeout = max(0.5, min(request_timeout, deadline - time.monotonic()))
        with Client(url, api_key, timeout=timeout, retries=0) as ops:
            done = upload(
                ops,
                sources,
                format=CLAUDE_CODE,
                final=final,
                deadline=deadline,
                after_each=remember,
            )
        sent = sum(s.offset for s in sources) - before
        left = sum(s.pending for s in sources)
    ids = ",".join(str(job.get("id")) for job in done.jobs) or "nothing new"
    waiting = f"; {left} bytes left" if left else ""
    ending = " (final)" if final and done.complete else ""
    return HookOutcome(
        f"{event} {session_id}: sent {sent} bytes{ending} ({ids}){waiting}", done.complete
    )


def _continue_in_background(payload: dict[str, Any], url: str | None, api_key: str | None) -> None:
    """Hand what is left at ``SessionEnd`` to a detached process (Claude Code is exiting
    and calls nothing after it), which has minutes instead of seconds."""
    env = dict(os.environ)
    if url:
        env["CONTEXTOPS_URL"] = url
    if api_key:
        env["CONTEXTOPS_API_KEY"] = api_key
    child = subprocess.Popen(
        [sys.executable, "-m", "contextops_client.cli", "claude-hook", "--background"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
    assert child.stdin is not None
    child.stdin.write(json.dumps(payload).encode())
    child.stdin.close()


def hook_main(
    stdin: Any = None,
    *,
    url: str | None = None,
    api_key: str | None = None,
    background: bool = False,
) -> int:
    """``contextops claude-hook``: read the hook's JSON, send, log; always 0.

    ``background`` is the detached continuation of a ``SessionEnd`` that ran out of
    time: it has minutes, and never hands on again."""
    budget = BACKGROUND_DEADLINE if background else _budget()
    timeout = BACKGROUND_REQUEST_TIMEOUT if background else HOOK_REQUEST_TIMEOUT
    previous = None if background else _alarm(int(budget) + HOOK_ALARM_MARGIN)
    where = "hook"
    try:
        raw = (stdin or sys.stdin).read()
        payload = json.loads(raw) if raw.strip() else {}
        if not isinstance(payload, dict):
            raise ValueError("the hook's input is not a JSON object")
        event = payload.get("hook_event_name")
        where = " ".join(str(p) for p in (event, payload.get("session_id")) if p) or where
        outcome = hook_run(
            payload, url=url, api_key=api_key, deadline_seconds=budget, request_timeout=timeout
        )
        log(outcome.message + (" [background]" if background else ""))
        if not outcome.complete and event == FINAL_EVENT and not background:
            _continue_in_background(payload, url, api_key)
            log(f"{where}: the rest is sent in the background")
    except BaseException as exc:  # never fail Claude Code, whatever happened
        detail = str(exc) or type(exc).__name__
        if not isinstance(exc, ContextopsError | ValueError | OSError | TimeoutError | _Overdue):
            detail += "\n" + traceback.format_exc()
        log(f"{where} error: {type(exc).__name__}: {detail}")
    finally:
        if previous is not None:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
    return 0
