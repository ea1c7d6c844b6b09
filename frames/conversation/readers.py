"""The transcript readers: Claude Code, Anthropic and OpenAI files read into a neutral list
of entries, with no database (``importing`` writes them as a session).

Formats:

- ``claude-code``: a Claude Code session file (JSON Lines). One event per line; an
  API response is spread over several assistant lines sharing ``message.id`` (usage is
  taken once, from its last line); ``tool_result`` blocks in user lines answer earlier
  ``tool_use`` ids; ``isSidechain`` runs (1.0.x) and ``subagents/agent-*.jsonl`` files
  beside the session file (2.x) are subagents; ``system``/``compact_boundary`` lines are
  compactions. Lines that are not JSON objects are reported with their number and skipped.
- ``anthropic``: a JSON list of Messages (each may carry ``usage``), an object with
  ``messages``, one Messages API response, or a VCR cassette (YAML) of Messages calls.
- ``openai``: chat messages with ``tool_calls`` and ``tool`` messages (a list, or an
  object with ``messages`` or ``traj``). OpenAI has no ``is_error``: a tool message whose
  content starts with "Error" counts as a failed result.

Every reader takes text (``read_transcript`` reads the files for it), so an upload and a
file on disk are read alike. A Claude Code file that is still being written (``growing``)
is read up to its last complete line, and reports how many of its entries are settled: the
ones before the first line of a response that may still get lines (its usage is placed
after its last line), so an import of the file in parts writes what a one-shot import of
the whole would.
"""

import gzip
import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

FORMATS = ("claude-code", "anthropic", "openai")
USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)


_SURROGATE = re.compile("[\ud800-\udfff]")


def storable(value: Any) -> Any:
    """``value`` with what no database column can hold replaced: NUL and lone surrogates become U+FFFD."""
    if isinstance(value, str):
        if "\x00" in value:
            value = value.replace("\x00", "\ufffd")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            value = _SURROGATE.sub("\ufffd", value)
        return value
    if isinstance(value, list):
        return [storable(v) for v in value]
    if isinstance(value, dict):
        return {storable(k): storable(v) for k, v in value.items()}
    return value


class TranscriptError(ValueError):
    """The file cannot be read as the format at all (not a line here and there)."""


MAX_DEPTH = 100


def _nested_too_deep(value: Any) -> bool:
    """Whether ``value`` nests lists and objects deeper than MAX_DEPTH (looked at without
    recursion, so that no depth can exhaust the stack)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            if depth > MAX_DEPTH:
                return True
            stack.extend((child, depth + 1) for child in item)
    return False


def _json(text: str | bytes) -> Any:
    """``json.loads``, refusing with ValueError what nests deeper than MAX_DEPTH."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise ValueError(f"nests deeper than {MAX_DEPTH} levels") from None
    if _nested_too_deep(data):
        raise ValueError(f"nests deeper than {MAX_DEPTH} levels")
    return data


class _PlainYamlLoader(yaml.SafeLoader):
    """YAML without aliases: a cassette has none, and expanding them can take any time."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            raise yaml.YAMLError("YAML aliases are not read")
        return super().compose_node(parent, index)


@dataclass
class Entry:
    """One message to group, or one model call's usage, for ``branch`` ("" is the main
    conversation), with the transcript's own time for it when the format has one."""

    kind: str  # "message" | "usage" | "compaction" (the agent's own, as the transcript says)
    branch: str = ""
    role: str = ""
    content: Any = None
    usage: dict | None = None
    line: int = 0
    timestamp: datetime | None = None

    def __post_init__(self) -> None:
        self.content = storable(self.content)

    def fingerprint(self) -> bytes:
        """What the entry writes, as bytes: two reads of one transcript agree on it."""
        return json.dumps(
            [self.kind, self.branch, self.role, self.content, self.usage],
            sort_keys=True,
            ensure_ascii=False,
            default=str,
        ).encode("utf-8", "surrogatepass")


@dataclass
class FileEntries:
    """The entries read from one file of a transcript, in writing order.

    ``settled``: how many leading entries no later part of the file can change (all of
    them, unless the file is read while it grows).
    """

    name: str
    entries: list[Entry]
    settled: int


@dataclass
class Transcript:
    format: str
    entries: list[Entry] = field(default_factory=list)
    branches: dict[str, str] = field(default_factory=dict)  # subagent branch -> description
    compactions: int = 0
    skipped: list[tuple[int, str]] = field(default_factory=list)
    model: str = ""
    title: str = ""  # the summary line, else the first real user prompt, command tags stripped
    summary: str = ""  # Claude Code 1.0.x: the session's ``summary`` line
    prompt: str = ""  # the first real user prompt, command tags stripped
    bytes_read: int = 0
    files: list[FileEntries] = field(default_factory=list)
    source_session_id: str = ""  # Claude Code's sessionId (``source_key``)
    started_at: datetime | None = None  # the first timestamp of the main file
    tool_version: str = ""  # the Claude Code version that wrote the last line

    @property
    def api_calls(self) -> int:
        return sum(1 for e in self.entries if e.kind == "usage")

    def count_blocks(self, kind: str, *, error: bool | None = None) -> int:
        return count_blocks(self.entries, kind, error=error)

    @property
    def settled_entries(self) -> list[Entry]:
        """Every file's settled entries: what an import of it so far writes."""
        return [entry for read in self.files for entry in read.entries[: read.settled]]


def count_blocks(entries: list[Entry], kind: str, *, error: bool | None = None) -> int:
    """How many content blocks of ``kind`` the message entries hold (only failed or only
    succeeded ones with ``error``)."""
    total = 0
    for entry in entries:
        if entry.kind != "message" or not isinstance(entry.content, list):
            continue
        for block in entry.content:
            if isinstance(block, dict) and block.get("type") == kind:
                if error is None or bool(block.get("is_error")) == error:
                    total += 1
    return total


def detect_format(path: Path) -> str:
    """claude-code for .jsonl, anthropic for YAML cassettes; for JSON, openai when any message has tool_calls or role tool."""
    if path.suffix in (".jsonl", ".yaml", ".yml"):
        return detect_format_of(path.name, "")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise TranscriptError(f"{path.name} is not JSON: {exc}") from None
    return detect_format_of(path.name, text)


def detect_format_of(name: str, text: str) -> str:
    """The format of a file called ``name`` holding ``text``, by the rules of ``detect_format``."""
    suffix = Path(name).suffix
    if suffix == ".jsonl":
        return "claude-code"
    if suffix in (".yaml", ".yml"):
        return "anthropic"
    try:
        data = _json(text)
    except ValueError as exc:
        if suffix != ".json" and text.lstrip().startswith("{") and "\n{" in text:
            return "claude-code"  # JSON Lines under another name
        raise TranscriptError(f"{name} is not JSON: {exc}") from None
    messages = _message_list(data)
    if any(
        isinstance(m, dict) and (m.get("role") in ("tool", "system") or "tool_calls" in m)
        for m in messages
    ):
        return "openai"
    return "anthropic"


def read_transcript(path: Path, fmt: str | None = None) -> Transcript:
    """Read the file at ``path`` (a Claude Code file with its ``subagents/`` folder)."""
    path = Path(path)
    fmt = fmt or detect_format(path)
    if fmt not in FORMATS:
        raise TranscriptError(f"Unknown format {fmt!r}; use one of {', '.join(FORMATS)}.")
    subagents = (
        [(sub.name, file_text(sub)) for sub in subagent_files(path)] if fmt == "claude-code" else []
    )
    return read_text(fmt, name=path.name, text=file_text(path), subagents=subagents)


def file_text(path: Path) -> str:
    """A file's text, with U+FFFD for bytes that are not UTF-8."""
    return path.read_bytes().decode("utf-8", errors="replace")


def subagent_files(path: Path) -> list[Path]:
    """The ``subagents/agent-*.jsonl`` files Claude Code 2.x keeps beside a session file."""
    folder = path.with_suffix("") / "subagents"
    return sorted(folder.glob("agent-*.jsonl")) if folder.is_dir() else []


def read_text(
    fmt: str,
    *,
    name: str,
    text: str,
    subagents: list[tuple[str, str]] | None = None,
    growing: bool = False,
) -> Transcript:
    """Read ``text``, the file ``name`` of format ``fmt``, with its subagent files (name, text).

    ``growing``: the files are still being written (Claude Code only): a line without its
    newline is left for later, and each file's ``settled`` count says what can be written.
    """
    if fmt == "claude-code":
        return read_claude_code_text(name, text, subagents or [], growing=growing)
    if fmt == "anthropic":
        return read_anthropic_text(name, text)
    if fmt == "openai":
        return read_openai_text(name, text)
    raise TranscriptError(f"Unknown format {fmt!r}; use one of {', '.join(FORMATS)}.")


def source_key(fmt: str, *, name: str, text: str, offset: int = 0) -> str:
    """Which transcript ``text`` (the part of the file ``name`` from byte ``offset``) belongs
    to, across uploads; "" when the part cannot tell (the caller looks for the transcript
    it continues).

    Claude Code's ``sessionId``: the file's name when it is one (Claude Code names each
    session's file by it, and a resumed session's file may hold lines of the one it
    resumed), else the first ``sessionId`` inside, else, for the start of a file, its
    stem. For the other formats, the file name and a hash of the file's first KB.
    """
    if fmt == "claude-code":
        stem = Path(name).stem
        if _SESSION_ID.match(stem):
            return stem
        for raw in text.split("\n"):
            if '"sessionId"' not in raw:
                continue
            try:
                event = _json(raw)
            except ValueError:
                continue
            if isinstance(event, dict) and isinstance(event.get("sessionId"), str):
                session_id = event["sessionId"].strip()
                if session_id:
                    return session_id[:300]
        return "" if offset else stem[:300]
    if offset:
        return ""
    head = text.encode("utf-8", "surrogatepass")[:1024]
    return f"{name[:200]}:{hashlib.sha256(head).hexdigest()[:16]}"


_SESSION_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


# -- Titles -------------------------------------------------------------------------------

# Claude Code wraps what is not the user's own words in tags: keep the inner text of those
# naming what the user typed, drop the others with what they hold.
_KEPT_TAGS = ("command-name", "command-args", "bash-input", "user-memory-input")
_DROPPED_TAGS = (
    "command-message",
    "command-contents",
    "local-command-stdout",
    "local-command-stderr",
    "local-command-caveat",
    "bash-stdout",
    "bash-stderr",
    "system-reminder",
    "task-notification",
    "user-prompt-submit-hook",
)
_DROPPED = re.compile("|".join(rf"<{tag}>.*?(?:</{tag}>|\Z)" for tag in _DROPPED_TAGS), re.DOTALL)
_KEPT = re.compile("|".join(rf"</?{tag}>" for tag in _KEPT_TAGS))
_NOT_A_PROMPT = re.compile(r"^\[Request interrupted by user[^\]]*\]$|^Caveat: The messages below")
TITLE_LENGTH = 300


def prompt_title(text: str) -> str:
    """A title from a user message: Claude Code's command tags stripped, on one line, at
    most 300 characters; "" when nothing of the user's own words is left."""
    text = _KEPT.sub(" ", _DROPPED.sub(" ", text))
    text = " ".join(text.split())
    if not text or _NOT_A_PROMPT.match(text):
        return ""
    if len(text) > TITLE_LENGTH:
        text = text[: TITLE_LENGTH - 1].rsplit(" ", 1)[0] + "…"
    return text


def _timestamp(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


# -- Claude Code --------------------------------------------------------------------------


def _jsonl(
    name: str, text: str, transcript: Transcript, *, growing: bool
) -> Iterator[tuple[int, dict]]:
    lines = text.split("\n")
    if growing or not lines[-1]:
        lines.pop()  # "" after the last newline, or a line still being written
    for number, raw in enumerate(lines, start=1):
        transcript.bytes_read += len(raw.encode("utf-8", "surrogatepass")) + 1
        if not raw.strip():
            continue
        try:
            event = _json(raw)
        except ValueError as exc:
            transcript.skipped.append((number, f"{name}:{number}: not JSON ({str(exc)[:80]})"))
            continue
        if not isinstance(event, dict):
            transcript.skipped.append((number, f"{name}:{number}: not a JSON object"))
            continue
        yield number, event


def _usage_of(message: dict) -> dict | None:
    usage = message.get("usage")
    if not isinstance(usage, dict):
        return None
    figures: dict[str, Any] = {}
    for name in USAGE_FIELDS:
        value = usage.get(name) or 0
        figures[name] = int(value) if isinstance(value, (int, float)) and value >= 0 else 0
    figures["model"] = str(message.get("model") or "")[:120]
    figures["message_id"] = str(message.get("id") or "")[:200]
    return figures


def _compaction_of(event: dict) -> dict:
    """What a ``compact_boundary`` line says of the compaction: ``pre_tokens`` (the window
    Claude Code measured before it; 0 when not given) and its ``trigger`` (auto, manual)."""
    metadata = event.get("compactMetadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    pre = metadata.get("preTokens")
    return {
        "pre_tokens": int(pre) if isinstance(pre, (int, float)) and pre >= 0 else 0,
        "trigger": str(metadata.get("trigger") or "")[:20],
    }


def _claude_code_events(
    name: str, text: str, transcript: Transcript, forced_branch: str | None, *, growing: bool
) -> FileEntries:
    """Entries of one file in file order; usage after the last line of each message id."""
    entries: list[Entry] = []
    sidechain_run: dict[str, str] = {}  # uuid -> branch, for inline sidechains
    runs = 0
    pending: list[
        tuple[str, int, dict, datetime | None]
    ] = []  # (id, index in entries, usage, time)
    # The latest response of each branch: its key and first line. While the file grows,
    # its lines (and so where its usage goes) may not all be written yet.
    latest: dict[str, tuple[str, int]] = {}
    main = forced_branch is None
    for number, event in _jsonl(name, text, transcript, growing=growing):
        kind = event.get("type")
        moment = _timestamp(event.get("timestamp"))
        if main:
            if moment is not None and transcript.started_at is None:
                transcript.started_at = moment
            if isinstance(event.get("version"), str) and event["version"]:
                transcript.tool_version = event["version"][:60]
        if kind == "summary" and main:
            transcript.summary = transcript.summary or prompt_title(str(event.get("summary") or ""))
            continue
        if kind == "system" and event.get("subtype") == "compact_boundary":
            transcript.compactions += 1
            entries.append(
                Entry(
                    "compaction",
                    branch=forced_branch or "",
                    usage=_compaction_of(event),
                    line=number,
                    timestamp=moment,
                )
            )
            continue
        if kind not in ("user", "assistant"):
            continue
        message = event.get("message")
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            transcript.skipped.append((number, f"{name}:{number}: {kind} line without a message"))
            continue
        branch = forced_branch if forced_branch is not None else ""
        if forced_branch is None and event.get("isSidechain"):
            parent = event.get("parentUuid")
            run_branch = sidechain_run.get(parent or "")
            if run_branch is None:
                runs += 1
                run_branch = str(event.get("agentId") or f"sidechain-{runs}")
                transcript.branches.setdefault(
                    run_branch, _first_text(message.get("content")) or f"Subagent {runs}"
                )
            branch = run_branch
            if event.get("uuid"):
                sidechain_run[event["uuid"]] = branch
        if (
            not transcript.model
            and kind == "assistant"
            and message.get("model")
            and message.get("model") != "<synthetic>"
        ):
            transcript.model = str(message["model"])[:120]
        if (
            main
            and not transcript.prompt
            and kind == "user"
            and branch == ""
            and not event.get("isMeta")
            and not event.get("isCompactSummary")
        ):
            transcript.prompt = prompt_title(_first_text(message.get("content")))
        entries.append(
            Entry(
                "message",
                branch=branch,
                role=message["role"],
                content=message.get("content"),
                line=number,
                timestamp=moment,
            )
        )
        if kind == "assistant" and message.get("model") != "<synthetic>":
            usage = _usage_of(message)
            if usage is not None:
                key = usage["message_id"] or f"line-{number}"
                if latest.get(branch, ("", 0))[0] != key:
                    latest[branch] = (key, number)
                pending.append((key, len(entries), usage | {"branch": branch}, moment))
    # One usage per message id, placed after its last line.
    last: dict[str, tuple[int, dict, datetime | None]] = {}
    for message_id, position, usage, moment in pending:
        last[message_id] = (position, usage, moment)
    for position, usage, moment in sorted(last.values(), key=lambda item: item[0], reverse=True):
        branch = usage.pop("branch")
        entries.insert(
            position,
            Entry(
                "usage",
                branch=branch,
                usage=usage,
                line=entries[position - 1].line,
                timestamp=moment,
            ),
        )
    return FileEntries(name, entries, _settled(entries, latest, forced_branch or "", growing))


def _settled(
    entries: list[Entry], latest: dict[str, tuple[str, int]], own: str, growing: bool
) -> int:
    """How many leading entries stay as they are whatever lines follow.

    A response may get more lines (and its usage, placed after its last line, may move)
    until the next response of its conversation starts, so everything from the first line
    of the file's latest response waits. An inline subagent runs while that response's
    tool call waits, after it in the file, so it waits too.
    """
    if not growing or not latest:
        return len(entries)
    cut = latest[own][1] if own in latest else min(start for _, start in latest.values())
    return sum(1 for entry in entries if entry.line < cut)


def _first_text(content: Any) -> str:
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):
        for block in content:
            if (
                isinstance(block, dict)
                and block.get("type") == "text"
                and str(block.get("text", "")).strip()
            ):
                return str(block["text"]).strip()
    return ""


def read_claude_code(path: Path) -> Transcript:
    return read_transcript(path, "claude-code")


def read_claude_code_text(
    name: str, text: str, subagents: list[tuple[str, str]], *, growing: bool = False
) -> Transcript:
    """A Claude Code session file and its 2.x subagent files (name, text), in that order."""
    transcript = Transcript(format="claude-code")
    main = _claude_code_events(name, text, transcript, None, growing=growing)
    transcript.files.append(main)
    for sub_name, sub_text in sorted(subagents):
        branch = Path(sub_name).stem
        read = _claude_code_events(sub_name, sub_text, transcript, branch, growing=growing)
        transcript.files.append(read)
        first = next((e for e in read.entries if e.kind == "message"), None)
        if first is not None:
            transcript.branches.setdefault(branch, _first_text(first.content) or branch)
    transcript.entries = [entry for read in transcript.files for entry in read.entries]
    transcript.title = transcript.summary or transcript.prompt
    transcript.source_session_id = source_key("claude-code", name=name, text=text)
    return transcript


# -- Anthropic Messages -------------------------------------------------------------------


def _message_list(data: Any) -> list:
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        for key in ("messages", "traj"):
            if isinstance(data.get(key), list):
                return data[key]
    return []


def _response_body(response: dict) -> dict | None:
    body = response.get("parsed_body")
    if isinstance(body, dict):
        return body
    raw = response.get("body")
    if isinstance(raw, dict):
        raw = raw.get("string")
    if isinstance(raw, str):
        raw = raw.encode("utf-8")
    if not isinstance(raw, bytes):
        return None
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    try:
        body = _json(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None
    return body if isinstance(body, dict) else None


def _request_body(request: dict) -> dict | None:
    body = request.get("parsed_body", request.get("body"))
    if isinstance(body, str):
        try:
            body = _json(body)
        except ValueError:
            return None
    return body if isinstance(body, dict) else None


def _anthropic_entries(messages: list, transcript: Transcript, line_base: int = 0) -> None:
    for i, message in enumerate(messages, start=1):
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            transcript.skipped.append(
                (line_base + i, f"message {line_base + i}: not a user or assistant message")
            )
            continue
        content = message.get("content")
        if isinstance(content, list):
            transcript.compactions += sum(
                1 for b in content if isinstance(b, dict) and b.get("type") == "compaction"
            )
        transcript.entries.append(
            Entry("message", role=message["role"], content=content, line=line_base + i)
        )
        usage = _usage_of(message) if message.get("role") == "assistant" else None
        if usage is not None:
            transcript.entries.append(Entry("usage", usage=usage, line=line_base + i))
            transcript.model = transcript.model or usage["model"]


def read_anthropic(path: Path) -> Transcript:
    return read_transcript(path, "anthropic")


def read_anthropic_text(name: str, text: str) -> Transcript:
    """Anthropic Messages in the file ``name``: a cassette when it is YAML, else JSON."""
    transcript = Transcript(format="anthropic")
    transcript.bytes_read = len(text.encode("utf-8", "surrogatepass"))
    if Path(name).suffix in (".yaml", ".yml"):
        return _titled(_read_cassette(text, transcript), name)
    try:
        data = _json(text)
    except ValueError as exc:
        raise TranscriptError(f"{name} is not JSON: {exc}") from None
    if isinstance(data, dict) and data.get("type") == "message":
        data = [data]
    messages = _message_list(data)
    if not messages:
        raise TranscriptError(f"{name} holds no Anthropic messages.")
    _anthropic_entries(messages, transcript)
    if isinstance(data, dict) and isinstance(data.get("usage"), dict):
        usage = _usage_of({"usage": data["usage"], "model": data.get("model", "")})
        transcript.entries.append(Entry("usage", usage=usage, line=len(messages)))
    return _titled(transcript, name)


def _titled(transcript: Transcript, name: str) -> Transcript:
    """The transcript with its title (the first user prompt) and its one file's entries."""
    for entry in transcript.entries:
        if entry.kind == "message" and entry.role == "user":
            transcript.prompt = prompt_title(_first_text(entry.content))
            if transcript.prompt:
                break
    transcript.title = transcript.prompt
    transcript.files = [FileEntries(name, transcript.entries, len(transcript.entries))]
    return transcript


def _read_cassette(text: str, transcript: Transcript) -> Transcript:
    try:
        data = yaml.load(text, Loader=_PlainYamlLoader)  # noqa: S506 (a safe loader)
    except yaml.YAMLError as exc:
        raise TranscriptError(f"not a YAML cassette: {str(exc)[:200]}") from None
    except RecursionError:
        data = None
    if data is None or _nested_too_deep(data):
        raise TranscriptError(f"not a YAML cassette, or one nesting deeper than {MAX_DEPTH}.")
    interactions = data.get("interactions") if isinstance(data, dict) else None
    if not isinstance(interactions, list):
        raise TranscriptError("a cassette needs an interactions list.")
    so_far: list = []
    for number, interaction in enumerate(interactions, start=1):
        request = (
            _request_body(interaction.get("request") or {})
            if isinstance(interaction, dict)
            else None
        )
        response = (
            _response_body(interaction.get("response") or {})
            if isinstance(interaction, dict)
            else None
        )
        if request is None or response is None or response.get("type") == "error":
            transcript.skipped.append(
                (number, f"interaction {number}: no readable request and response")
            )
            continue
        sent = [m for m in request.get("messages", []) if isinstance(m, dict)]
        new = (
            sent[len(so_far) :]
            if sent[: len(so_far)] == so_far and len(sent) > len(so_far)
            else sent[-1:]
        )
        reply = {
            "role": "assistant",
            "content": response.get("content", []),
            "usage": response.get("usage"),
            "model": response.get("model"),
            "id": response.get("id"),
        }
        _anthropic_entries([*new, reply], transcript, line_base=number * 1000)
        so_far = [*sent, {"role": "assistant", "content": response.get("content", [])}]
    return transcript


# -- OpenAI chat ----------------------------------------------------------------------------


def read_openai(path: Path) -> Transcript:
    return read_transcript(path, "openai")


def read_openai_text(name: str, text: str) -> Transcript:
    transcript = Transcript(format="openai")
    transcript.bytes_read = len(text.encode("utf-8", "surrogatepass"))
    try:
        data = _json(text)
    except ValueError as exc:
        raise TranscriptError(f"{name} is not JSON: {exc}") from None
    messages = _message_list(data)
    if not messages:
        raise TranscriptError(f"{name} holds no chat messages.")
    for number, message in enumerate(messages, start=1):
        if not isinstance(message, dict):
            transcript.skipped.append((number, f"message {number}: not an object"))
            continue
        role = message.get("role")
        content = message.get("content")
        if role == "system":
            continue
        if role == "user":
            transcript.entries.append(
                Entry(
                    "message",
                    role="user",
                    content=content if isinstance(content, (str, list)) else "",
                    line=number,
                )
            )
        elif role == "assistant":
            blocks: list[dict] = []
            if isinstance(content, str) and content:
                blocks.append({"type": "text", "text": content})
            for call in message.get("tool_calls") or []:
                if not isinstance(call, dict):
                    continue
                function: dict = call["function"] if isinstance(call.get("function"), dict) else {}
                arguments = function.get("arguments", "{}")
                try:
                    parsed = _json(arguments) if isinstance(arguments, str) else arguments
                except ValueError:
                    parsed = {"arguments": arguments}
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": str(call.get("id") or f"call-{number}"),
                        "name": str(function.get("name") or "tool"),
                        "input": parsed if isinstance(parsed, dict) else {"arguments": parsed},
                    }
                )
            transcript.entries.append(
                Entry("message", role="assistant", content=blocks, line=number)
            )
            usage = message.get("usage")
            if isinstance(usage, dict):
                cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
                figures = {
                    # OpenAI's prompt_tokens include the cached ones; ours exclude them.
                    "input_tokens": max(0, int(usage.get("prompt_tokens") or 0) - cached),
                    "output_tokens": int(usage.get("completion_tokens") or 0),
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": cached,
                    "model": str(message.get("model") or "")[:120],
                    "message_id": "",
                }
                transcript.entries.append(Entry("usage", usage=figures, line=number))
        elif role == "tool":
            output = content if isinstance(content, str) else json.dumps(content)
            transcript.entries.append(
                Entry(
                    "message",
                    role="user",
                    content=[
                        {
                            "type": "tool_result",
                            "tool_use_id": str(message.get("tool_call_id") or ""),
                            "content": output,
                            "is_error": output.strip().lower().startswith("error"),
                        }
                    ],
                    line=number,
                )
            )
        else:
            transcript.skipped.append((number, f"message {number}: unknown role {role!r}"))
    return _titled(transcript, name)
