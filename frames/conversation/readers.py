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
"""

import gzip
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
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


@dataclass
class Entry:
    """One message to group, or one model call's usage, for ``branch`` ("" is the main conversation)."""

    kind: str  # "message" | "usage"
    branch: str = ""
    role: str = ""
    content: Any = None
    usage: dict | None = None
    line: int = 0

    def __post_init__(self) -> None:
        self.content = storable(self.content)


@dataclass
class Transcript:
    format: str
    entries: list[Entry] = field(default_factory=list)
    branches: dict[str, str] = field(default_factory=dict)  # subagent branch -> description
    compactions: int = 0
    skipped: list[tuple[int, str]] = field(default_factory=list)
    model: str = ""
    title: str = ""
    bytes_read: int = 0

    @property
    def api_calls(self) -> int:
        return sum(1 for e in self.entries if e.kind == "usage")

    def count_blocks(self, kind: str, *, error: bool | None = None) -> int:
        total = 0
        for entry in self.entries:
            if entry.kind != "message" or not isinstance(entry.content, list):
                continue
            for block in entry.content:
                if isinstance(block, dict) and block.get("type") == kind:
                    if error is None or bool(block.get("is_error")) == error:
                        total += 1
        return total


def detect_format(path: Path) -> str:
    """claude-code for .jsonl, anthropic for YAML cassettes; for JSON, openai when any message has tool_calls or role tool."""
    if path.suffix == ".jsonl":
        return "claude-code"
    if path.suffix in (".yaml", ".yml"):
        return "anthropic"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise TranscriptError(f"{path.name} is not JSON: {exc}") from None
    messages = _message_list(data)
    if any(
        isinstance(m, dict) and (m.get("role") in ("tool", "system") or "tool_calls" in m)
        for m in messages
    ):
        return "openai"
    return "anthropic"


def read_transcript(path: Path, fmt: str | None = None) -> Transcript:
    path = Path(path)
    fmt = fmt or detect_format(path)
    if fmt == "claude-code":
        return read_claude_code(path)
    if fmt == "anthropic":
        return read_anthropic(path)
    if fmt == "openai":
        return read_openai(path)
    raise TranscriptError(f"Unknown format {fmt!r}; use one of {', '.join(FORMATS)}.")


# -- Claude Code --------------------------------------------------------------------------


def _jsonl(path: Path, transcript: Transcript) -> Iterator[tuple[int, dict]]:
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            transcript.bytes_read += len(raw)
            if not raw.strip():
                continue
            try:
                event = json.loads(raw.decode("utf-8"))
            except (ValueError, UnicodeDecodeError) as exc:
                transcript.skipped.append(
                    (number, f"{path.name}:{number}: not JSON ({str(exc)[:80]})")
                )
                continue
            if not isinstance(event, dict):
                transcript.skipped.append((number, f"{path.name}:{number}: not a JSON object"))
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


def _claude_code_events(
    path: Path, transcript: Transcript, forced_branch: str | None
) -> list[Entry]:
    """Entries of one file in file order; usage after the last line of each message id."""
    entries: list[Entry] = []
    sidechain_run: dict[str, str] = {}  # uuid -> branch, for inline sidechains
    runs = 0
    pending: list[tuple[str, int, dict]] = []  # (message id, index in entries, usage)
    for number, event in _jsonl(path, transcript):
        kind = event.get("type")
        if kind == "system" and event.get("subtype") == "compact_boundary":
            transcript.compactions += 1
            continue
        if kind not in ("user", "assistant"):
            continue
        message = event.get("message")
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            transcript.skipped.append(
                (number, f"{path.name}:{number}: {kind} line without a message")
            )
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
        if not transcript.title and kind == "user" and branch == "" and not event.get("isMeta"):
            transcript.title = (_first_text(message.get("content")) or "")[:300]
        entries.append(
            Entry(
                "message",
                branch=branch,
                role=message["role"],
                content=message.get("content"),
                line=number,
            )
        )
        if kind == "assistant" and message.get("model") != "<synthetic>":
            usage = _usage_of(message)
            if usage is not None:
                pending.append(
                    (
                        usage["message_id"] or f"line-{number}",
                        len(entries),
                        usage | {"branch": branch},
                    )
                )
    # One usage per message id, placed after its last line.
    last: dict[str, tuple[int, dict]] = {}
    for message_id, position, usage in pending:
        last[message_id] = (position, usage)
    for position, usage in sorted(last.values(), key=lambda item: item[0], reverse=True):
        branch = usage.pop("branch")
        entries.insert(
            position, Entry("usage", branch=branch, usage=usage, line=entries[position - 1].line)
        )
    return entries


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
    transcript = Transcript(format="claude-code")
    transcript.entries = _claude_code_events(path, transcript, None)
    folder = path.with_suffix("") / "subagents"
    if folder.is_dir():
        for sub in sorted(folder.glob("agent-*.jsonl")):
            branch = sub.stem
            before = len(transcript.entries)
            transcript.entries += _claude_code_events(sub, transcript, branch)
            first = next((e for e in transcript.entries[before:] if e.kind == "message"), None)
            transcript.branches.setdefault(
                branch, (_first_text(first.content) if first else "") or branch
            )
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
        body = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None
    return body if isinstance(body, dict) else None


def _request_body(request: dict) -> dict | None:
    body = request.get("parsed_body", request.get("body"))
    if isinstance(body, str):
        try:
            body = json.loads(body)
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
    transcript = Transcript(format="anthropic")
    text = path.read_text(encoding="utf-8")
    transcript.bytes_read = len(text.encode("utf-8"))
    if path.suffix in (".yaml", ".yml"):
        return _read_cassette(text, transcript)
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise TranscriptError(f"{path.name} is not JSON: {exc}") from None
    if isinstance(data, dict) and data.get("type") == "message":
        data = [data]
    messages = _message_list(data)
    if not messages:
        raise TranscriptError(f"{path.name} holds no Anthropic messages.")
    _anthropic_entries(messages, transcript)
    if isinstance(data, dict) and isinstance(data.get("usage"), dict):
        usage = _usage_of({"usage": data["usage"], "model": data.get("model", "")})
        transcript.entries.append(Entry("usage", usage=usage, line=len(messages)))
    return transcript


def _read_cassette(text: str, transcript: Transcript) -> Transcript:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise TranscriptError(f"not a YAML cassette: {str(exc)[:200]}") from None
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
    transcript = Transcript(format="openai")
    text = path.read_text(encoding="utf-8")
    transcript.bytes_read = len(text.encode("utf-8"))
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise TranscriptError(f"{path.name} is not JSON: {exc}") from None
    messages = _message_list(data)
    if not messages:
        raise TranscriptError(f"{path.name} holds no chat messages.")
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
                    parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
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
    return transcript
