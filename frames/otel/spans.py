"""OTLP/HTTP trace bodies into plain spans, and what a span is in the GenAI semantic
conventions: no database here.

A body is ``ExportTraceServiceRequest`` in protobuf (``application/x-protobuf``) or in
OTLP's JSON mapping (``application/json``: ids in hex, enums as numbers, unknown fields
ignored as the specification asks), gzip-compressed or not. Attributes keep every value
as JSON (arrays and key-value lists included), so a key we do not know is stored too.

Names read, current first, deprecated after (both map):

* operation: ``gen_ai.operation.name`` (``chat``, ``text_completion``,
  ``generate_content``, ``invoke_agent``, ``create_agent``, ``execute_tool``, ...); also
  OpenInference's ``openinference.span.kind`` and OpenLLMetry's ``traceloop.span.kind``;
* usage: ``gen_ai.usage.input_tokens`` / ``gen_ai.usage.prompt_tokens``,
  ``gen_ai.usage.output_tokens`` / ``gen_ai.usage.completion_tokens``,
  ``gen_ai.usage.cache_read.input_tokens`` / ``gen_ai.usage.cache_read_input_tokens``,
  ``gen_ai.usage.cache_creation.input_tokens`` / ``gen_ai.usage.cache_creation_input_tokens``;
  the conventions count cached input inside ``input_tokens``, so the input we store (which
  excludes both cache fields, as Anthropic's does) is what remains of it;
* provider: ``gen_ai.provider.name`` / ``gen_ai.system``;
* model: ``gen_ai.response.model``, else ``gen_ai.request.model``;
* content: ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (JSON, parts) and
  ``gen_ai.system_instructions``; the older per-message span events
  (``gen_ai.user.message``, ``gen_ai.assistant.message``, ``gen_ai.tool.message``,
  ``gen_ai.choice``) when an instrumentation put them on the span;
* tools: ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.tool.call.arguments``,
  ``gen_ai.tool.call.result``.
"""

import base64
import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

PROTOBUF = "application/x-protobuf"
JSON = "application/json"

AGENT_OPERATIONS = frozenset({"invoke_agent", "create_agent", "invoke_workflow"})
MODEL_OPERATIONS = frozenset(
    {"chat", "text_completion", "generate_content", "completion", "responses"}
)
TOOL_OPERATIONS = frozenset({"execute_tool"})
# OpenInference (openinference.span.kind) and OpenLLMetry (traceloop.span.kind).
AGENT_KINDS = frozenset({"agent", "chain", "workflow", "task"})
MODEL_KINDS = frozenset({"llm"})
TOOL_KINDS = frozenset({"tool"})

INPUT = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")
OUTPUT = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens")
CACHE_READ = ("gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens")
CACHE_CREATION = (
    "gen_ai.usage.cache_creation.input_tokens",
    "gen_ai.usage.cache_creation_input_tokens",
)
PROVIDER = ("gen_ai.provider.name", "gen_ai.system")
MODEL = ("gen_ai.response.model", "gen_ai.request.model")
CONVERSATION = ("gen_ai.conversation.id", "session.id")
MESSAGE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}


class BodyInvalid(ValueError):
    """A body that is not an OTLP trace export; its text says why."""


@dataclass
class SpanData:
    """One span as sent, ids in lowercase hex, times in UTC."""

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    started_at: datetime | None
    ended_at: datetime | None
    status_code: str
    status_message: str
    attributes: dict[str, Any]
    events: list[dict[str, Any]] = field(default_factory=list)
    resource: dict[str, Any] = field(default_factory=dict)
    scope: dict[str, Any] = field(default_factory=dict)

    def first(self, names: tuple[str, ...]) -> Any:
        """The value of the first of ``names`` the span carries, or None."""
        for name in names:
            if self.attributes.get(name) not in (None, ""):
                return self.attributes[name]
        return None

    def count(self, names: tuple[str, ...]) -> int:
        """A token count: the first of ``names`` as a whole number not below 0."""
        value = self.first(names)
        try:
            return max(0, int(value)) if value is not None else 0
        except (TypeError, ValueError):
            return 0

    @property
    def operation(self) -> str:
        return str(self.attributes.get("gen_ai.operation.name") or "").lower()

    @property
    def kind(self) -> str:
        """``agent``, ``model_call``, ``tool`` or ``other`` (ReceivedSpan.Kind's values)."""
        operation = self.operation
        marked = str(
            self.attributes.get("openinference.span.kind")
            or self.attributes.get("traceloop.span.kind")
            or ""
        ).lower()
        if operation in AGENT_OPERATIONS or marked in AGENT_KINDS:
            return "agent"
        if operation in TOOL_OPERATIONS or marked in TOOL_KINDS:
            return "tool"
        if operation in MODEL_OPERATIONS or marked in MODEL_KINDS:
            return "model_call"
        if operation == "" and self.first(INPUT + OUTPUT) is not None:
            return "model_call"  # usage without a named operation: a model call still
        return "other"

    @property
    def conversation_id(self) -> str:
        return str(self.first(CONVERSATION) or "")

    @property
    def model(self) -> str:
        return str(self.first(MODEL) or "")[:120]

    @property
    def latency_ms(self) -> int | None:
        if self.started_at is None or self.ended_at is None:
            return None
        return max(0, round((self.ended_at - self.started_at).total_seconds() * 1000))

    def usage(self) -> dict[str, Any]:
        """The call's four usage fields as ``usage_record`` takes them, with its model,
        response id, start and latency."""
        cache_read = self.count(CACHE_READ)
        cache_creation = self.count(CACHE_CREATION)
        return {
            "input_tokens": max(0, self.count(INPUT) - cache_read - cache_creation),
            "output_tokens": self.count(OUTPUT),
            "cache_read_input_tokens": cache_read,
            "cache_creation_input_tokens": cache_creation,
            "model": self.model,
            "message_id": str(self.attributes.get("gen_ai.response.id") or "")[:200]
            or f"otel:{self.trace_id}:{self.span_id}",
            "started_at": self.started_at,
            "latency_ms": self.latency_ms,
        }

    @property
    def agent_name(self) -> str:
        return str(self.attributes.get("gen_ai.agent.name") or "")


def span_fields(span: Any) -> dict[str, Any]:
    """``SpanData``'s fields read off ``span`` (a ``SpanData``, or a ``ReceivedSpan`` row that
    stores them), by name."""
    return {f.name: getattr(span, f.name) for f in fields(SpanData)}


@dataclass
class Export:
    """A decoded request: its spans, and those refused while reading it with why."""

    spans: list[SpanData]
    rejected: int = 0
    errors: list[str] = field(default_factory=list)


# -- Values --------------------------------------------------------------------------------


def any_value(value: AnyValue) -> Any:
    """An OTLP ``AnyValue`` as JSON: arrays as lists, key-value lists as objects, bytes
    as base64 text."""
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return attributes_of(value.kvlist_value.values)
    if which == "bytes_value":
        return base64.b64encode(value.bytes_value).decode()
    if which == "double_value":
        number = value.double_value
        return number if number == number and abs(number) != float("inf") else str(number)
    return getattr(value, which)


def attributes_of(pairs: Any) -> dict[str, Any]:
    return {pair.key: any_value(pair.value) for pair in pairs if isinstance(pair, KeyValue)}


def _time(nanos: int) -> datetime | None:
    if not nanos:
        return None
    try:
        return datetime.fromtimestamp(nanos / 1e9, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


# -- Bodies --------------------------------------------------------------------------------


def media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def decompressed(body: bytes, encoding: str, *, limit: int) -> bytes:
    """``body`` without its ``Content-Encoding`` (``gzip``, ``deflate`` or none); never
    more than ``limit`` bytes (BodyTooLarge past it)."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding not in ("gzip", "deflate"):
        raise BodyInvalid(f"Content-Encoding {encoding!r} is not supported: send gzip or none.")
    wbits = 16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS
    inflater = zlib.decompressobj(wbits)
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise BodyInvalid(f"The body is not valid {encoding}: {exc}.") from None
    if len(out) > limit:
        raise BodyTooLarge(limit)
    if not inflater.eof:
        raise BodyInvalid(f"The {encoding} body is truncated.")
    return out


class BodyTooLarge(ValueError):
    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self.limit = limit


def _hex_to_base64(obj: dict, key: str) -> None:
    value = obj.get(key)
    if not isinstance(value, str) or not value:
        return
    try:
        obj[key] = base64.b64encode(bytes.fromhex(value)).decode()
    except ValueError:
        raise BodyInvalid(f"{key} {value[:40]!r} is not hexadecimal.") from None


def request_from_json(body: bytes) -> ExportTraceServiceRequest:
    """OTLP's JSON mapping: protobuf's, except that trace and span ids are hex."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BodyInvalid(f"The body is not JSON: {exc}.") from None
    if not isinstance(data, dict):
        raise BodyInvalid("The body must be a JSON object with resourceSpans.")
    for resource_spans in _items(data, "resourceSpans", "resource_spans"):
        for scope_spans in _items(resource_spans, "scopeSpans", "scope_spans"):
            for span in _items(scope_spans, "spans"):
                for key in ("traceId", "spanId", "parentSpanId", "trace_id", "span_id"):
                    _hex_to_base64(span, key)
                _hex_to_base64(span, "parent_span_id")
                for link in _items(span, "links"):
                    for key in ("traceId", "spanId", "trace_id", "span_id"):
                        _hex_to_base64(link, key)
    message = ExportTraceServiceRequest()
    try:
        json_format.ParseDict(data, message, ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise BodyInvalid(f"The body is not an OTLP trace export: {exc}.") from None
    return message


def _items(obj: Any, *keys: str) -> Iterator[dict]:
    for key in keys:
        values = obj.get(key) if isinstance(obj, dict) else None
        if isinstance(values, list):
            yield from (v for v in values if isinstance(v, dict))


def request_from_protobuf(body: bytes) -> ExportTraceServiceRequest:
    message = ExportTraceServiceRequest()
    try:
        message.ParseFromString(body)
    except (DecodeError, ValueError) as exc:
        raise BodyInvalid(f"The body is not an OTLP trace export in protobuf: {exc}.") from None
    return message


def span_count(request: ExportTraceServiceRequest) -> int:
    return sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)


def spans_of(request: ExportTraceServiceRequest) -> Export:
    """The request's spans; one without a valid trace or span id is rejected (and said)."""
    export = Export(spans=[])
    statuses = {1: "ok", 2: "error"}
    for resource_spans in request.resource_spans:
        resource = attributes_of(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            scope = {"name": scope_spans.scope.name, "version": scope_spans.scope.version}
            for span in scope_spans.spans:
                trace_id, span_id = span.trace_id.hex(), span.span_id.hex()
                if len(span.trace_id) != 16 or not any(span.trace_id):
                    export.rejected += 1
                    export.errors.append(f"span {span.name!r}: the trace id must be 16 bytes.")
                    continue
                if len(span.span_id) != 8 or not any(span.span_id):
                    export.rejected += 1
                    export.errors.append(f"span {span.name!r}: the span id must be 8 bytes.")
                    continue
                parent = span.parent_span_id.hex() if len(span.parent_span_id) == 8 else ""
                export.spans.append(
                    SpanData(
                        trace_id=trace_id,
                        span_id=span_id,
                        parent_span_id=parent,
                        name=span.name[:300],
                        started_at=_time(span.start_time_unix_nano),
                        ended_at=_time(span.end_time_unix_nano),
                        status_code=statuses.get(span.status.code, ""),
                        status_message=span.status.message,
                        attributes=attributes_of(span.attributes),
                        events=[
                            {
                                "name": event.name,
                                "time": (
                                    t.isoformat() if (t := _time(event.time_unix_nano)) else None
                                ),
                                "attributes": attributes_of(event.attributes),
                            }
                            for event in span.events
                        ],
                        resource=resource,
                        scope=scope,
                    )
                )
    return export


def response_body(*, rejected: int, error_message: str, as_json: bool) -> bytes:
    """``ExportTraceServiceResponse``: empty on full success, else ``partial_success``."""
    response = ExportTraceServiceResponse()
    if rejected or error_message:
        response.partial_success.rejected_spans = rejected
        response.partial_success.error_message = error_message
    if as_json:
        return json_format.MessageToJson(response, indent=None).encode()
    return response.SerializeToString()


# -- Content -------------------------------------------------------------------------------


def _parsed(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _arguments(raw: Any) -> dict[str, Any]:
    value = _parsed(raw)
    if isinstance(value, dict):
        return value
    return {} if value in (None, "") else {"value": value}


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return "" if value is None else json.dumps(value, ensure_ascii=False)


def _message(role: str, parts: list[dict]) -> dict[str, Any] | None:
    """A conventions message (role and parts) in the Anthropic Messages shape our
    ingest takes; system messages are instructions, not turns (as the wrappers do)."""
    blocks: list[dict[str, Any]] = []
    for part in parts:
        kind = part.get("type")
        if kind == "text":
            text = _text(part.get("content"))
            if text:
                blocks.append({"type": "text", "text": text})
        elif kind == "tool_call":
            blocks.append(
                {
                    "type": "tool_use",
                    "id": str(part.get("id") or ""),
                    "name": str(part.get("name") or "tool"),
                    "input": _arguments(part.get("arguments")),
                }
            )
        elif kind == "tool_call_response":
            output = _text(part.get("response", part.get("result")))
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": str(part.get("id") or ""),
                "content": output,
            }
            if output.lower().startswith("error"):
                block["is_error"] = True
            blocks.append(block)
        elif kind == "reasoning":
            text = _text(part.get("content"))
            if text:
                blocks.append({"type": "thinking", "thinking": text})
    if role in ("system", "developer") or not blocks:
        return None
    if role == "tool" or all(b["type"] == "tool_result" for b in blocks):
        role = "user"
    return {"role": "assistant" if role == "assistant" else "user", "content": blocks}


def _from_event(name: str, attrs: dict[str, Any]) -> tuple[str, list[dict]] | None:
    """The older per-message span events as a role and parts."""
    body = attrs.get("message") if name == "gen_ai.choice" else attrs
    body = _parsed(body) if body is not None else {}
    if not isinstance(body, dict):
        return None
    role = "assistant" if name == "gen_ai.choice" else MESSAGE_EVENTS.get(name)
    if role is None:
        return None
    parts: list[dict] = []
    if body.get("content") not in (None, ""):
        if role == "tool":
            parts.append(
                {"type": "tool_call_response", "id": body.get("id"), "response": body["content"]}
            )
        else:
            parts.append({"type": "text", "content": body["content"]})
    for call in _parsed(body.get("tool_calls")) or []:
        if isinstance(call, dict):
            function = call.get("function") or {}
            parts.append(
                {
                    "type": "tool_call",
                    "id": call.get("id"),
                    "name": function.get("name") or call.get("name"),
                    "arguments": function.get("arguments", call.get("arguments")),
                }
            )
    return role, parts


def conversation_messages(span: SpanData) -> tuple[list[dict], list[dict]]:
    """The call's input and output messages in the Anthropic shape, when captured."""
    inputs: list[dict] = []
    outputs: list[dict] = []
    for key, into in (("gen_ai.input.messages", inputs), ("gen_ai.output.messages", outputs)):
        for message in _parsed(span.attributes.get(key)) or []:
            if isinstance(message, dict) and isinstance(message.get("parts"), list):
                converted = _message(str(message.get("role") or "user"), message["parts"])
                if converted is not None:
                    into.append(converted)
    if not inputs and not outputs:
        for event in span.events:
            read = _from_event(event["name"], event["attributes"])
            if read is not None:
                converted = _message(*read)
                if converted is not None:
                    (outputs if event["name"] == "gen_ai.choice" else inputs).append(converted)
    return inputs, outputs


def tool_messages(span: SpanData) -> list[dict]:
    """A tool span as the call and its result, in the Anthropic shape."""
    call_id = str(span.attributes.get("gen_ai.tool.call.id") or f"otel:{span.span_id}")
    name = str(span.attributes.get("gen_ai.tool.name") or span.name or "tool")
    result = span.attributes.get("gen_ai.tool.call.result")
    if result is None and span.status_code == "error":
        result = f"error: {span.status_message or 'the tool failed'}"
    use = {
        "type": "tool_use",
        "id": call_id,
        "name": name,
        "input": _arguments(span.attributes.get("gen_ai.tool.call.arguments")),
    }
    output = _text(result)
    answer: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": output}
    if span.status_code == "error" or output.lower().startswith("error"):
        answer["is_error"] = True
    return [{"role": "assistant", "content": [use]}, {"role": "user", "content": [answer]}]
