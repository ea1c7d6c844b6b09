"""contextops as an MCP server: ``contextops mcp`` (stdio) and ``contextops mcp --http``.

Every tool is one operation of the JSON API, called through :class:`AsyncClient` with an
API key: over stdio the key the command was given (``--api-key`` /
``$CONTEXTOPS_API_KEY``), over Streamable HTTP the caller's own, sent as
``Authorization: Bearer <key>`` with every request (a request without a key the server
accepts answers 401 and never reaches a tool).

A tool takes the body fields of its operation plus the operation's path parameters by
name (``session_id``, ``frame_id``, ``key``, ``state_id``, ``name``). Arguments that do not
fit the tool's input schema (missing, unknown, wrong type, out of range) answer the API's
422 ``validation_error`` before anything is sent; the rest goes to the API, whose own
validation still applies. The answer is the API's JSON, as text and as structured content
(``context_pack``'s with its ``dropped`` cut to the best-ranked, ``pack_answer``); an API error is a tool error (``isError``) whose text is the error's JSON
(``error``, ``detail`` and the code's extra fields, plus the HTTP ``status``).

Needs the ``mcp`` extra: ``pip install "contextops-client[mcp]"``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import string
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx
import uvicorn
from jsonschema import Draft202012Validator
from mcp import types
from mcp.server import Server, ServerRequestContext
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from ._http import USER_AGENT, split_base_url
from .aio import AsyncClient
from .errors import ContextopsError, Unauthenticated

logger = logging.getLogger("contextops_client.mcp")

SERVER_NAME = "contextops"
HTTP_PATH = "/mcp"
DEFAULT_PORT = 8765
# A key the server accepted is not asked about again for this long; the API still checks
# it on every tool call, so a revoked key fails there at once.
KEY_CHECK_TTL = 60.0

INSTRUCTIONS = """\
contextops keeps an agent's working context: sessions, frames (sub-tasks with token
budgets), facts with supersession, a working set, context packs and RLM state.
Start with session_start (or session_resume to continue a session), push a frame per
sub-task with frame_push and pop it with frame_pop, ask context_pack for what to know
before reasoning, record what must be remembered with fact_write and check it with
fact_current. After each model call, record its token usage with usage_record on the
frame it worked for (that is what the session's cost counts); end the session with
session_end when the work is done. Ids come from earlier answers. An error answers JSON
{"error": code, "detail": sentence, ...}: act on the code (insufficient_tokens: ask for
less or pop something; not_found: the id is wrong or not yours; validation_error:
`errors` names the field)."""


# -- the tools -----------------------------------------------------------------------------


def _obj(
    properties: dict[str, Any], required: tuple[str, ...] = (), *, strict: bool = True
) -> dict[str, Any]:
    """An object schema; ``strict`` refuses fields it does not name, as the API does."""
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    if strict:
        schema["additionalProperties"] = False
    return schema


def _str(description: str, **limits: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **limits}


def _int(description: str, **limits: Any) -> dict[str, Any]:
    return {"type": "integer", "description": description, **limits}


ANY_JSON: dict[str, Any] = {"description": "Any JSON value."}
SESSION_ID = _str("The session's id (from session_start or a session list).")
FRAME_ID = _str("The frame's id (from frame_push).")
STATE_ID = _str("The RLM state's id (state-xxxxxxxx, from rlm_state_create).")
CONFLICT_ID = _str("The proposal's id, from fact_conflicts or a fact write's proposed_conflicts.")
# The API's ceiling on any token count (frames.schemas.MAX_BUDGET).
MAX_TOKENS = 1_000_000_000

IDENTITY = _obj(
    {
        "user_name": _str("Who the agent works for.", maxLength=200),
        "user_id": _str("Their id in your systems.", maxLength=200),
        "authority": _str(
            "Their authority level (e.g. employee, manager, executive): decides which facts "
            "they read and may supersede.",
            maxLength=64,
        ),
        "department": _str("Their department.", maxLength=200),
        "organization": _str("Their organization.", maxLength=200),
        "permissions": {
            "type": "array",
            "items": {"type": "string"},
            "maxItems": 200,
            "description": "Permissions they hold (facts may require one to be read).",
        },
    }
)
ENVIRONMENT = _obj(
    {
        "timezone": _str("An IANA time zone, e.g. Europe/Paris.", maxLength=64),
        "location": _str("Where the work happens.", maxLength=200),
        "external_data": {"type": "object", "description": "Any other context, as JSON."},
    }
)


@dataclass(frozen=True)
class Tool:
    """One tool: the API operation it calls (``path`` names its parameters in braces, each
    a required string argument) and the schema of the body's fields."""

    name: str
    method: str
    path: str
    description: str
    body: dict[str, Any] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    read_only: bool = False
    idempotent: bool = False
    destructive: bool = False
    path_descriptions: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    # Arguments of the tool's own (never sent to the API) and what makes the tool's answer
    # of the API's and those arguments (the API's answer itself when None).
    options: dict[str, Any] = field(default_factory=dict)
    answer: Callable[[Any, Mapping[str, Any]], Any] | None = None

    @property
    def path_params(self) -> tuple[str, ...]:
        return tuple(
            name for _, name, _, _ in string.Formatter().parse(self.path) if name is not None
        )

    @property
    def has_body(self) -> bool:
        return self.method in ("POST", "PUT", "PATCH")

    def input_schema(self) -> dict[str, Any]:
        params = {
            name: {
                **(self.path_descriptions.get(name) or _str(name.replace("_", " ").capitalize())),
                "minLength": 1,
            }
            for name in self.path_params
        }
        return _obj({**params, **self.body, **self.options}, (*self.path_params, *self.required))

    def definition(self) -> types.Tool:
        return types.Tool(
            name=self.name,
            description=self.description,
            input_schema=self.input_schema(),
            annotations=types.ToolAnnotations(
                read_only_hint=self.read_only,
                destructive_hint=self.destructive if not self.read_only else None,
                idempotent_hint=self.idempotent or self.read_only,
                open_world_hint=False,
            ),
        )

    def request(self, arguments: Mapping[str, Any]) -> tuple[str, dict[str, Any] | None]:
        """The API path (its parameters percent-encoded) and body for ``arguments``, an
        optional one given as null left out; raises :class:`InvalidArguments` when they do
        not fit :meth:`input_schema`."""
        arguments = self.arguments(arguments)
        path = self.path.format(**{n: quote(arguments[n], safe="") for n in self.path_params})
        if not self.has_body:
            return path, None
        sent = {k: v for k, v in arguments.items() if k not in self.options}
        return path, {k: v for k, v in sent.items() if k not in self.path_params}

    def arguments(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """``arguments`` without the optional ones given as null; raises
        :class:`InvalidArguments` when they do not fit :meth:`input_schema`."""
        schema = self.input_schema()
        given: dict[str, Any] = without_nulls(dict(arguments), schema)
        invalid = argument_errors(schema, given)
        if invalid:
            raise InvalidArguments(invalid)
        return given

    def answered(self, data: Any, arguments: Mapping[str, Any]) -> Any:
        """The tool's answer for the API's ``data``."""
        if self.answer is None:
            return data
        return self.answer(data, {k: v for k, v in arguments.items() if k in self.options})


def without_nulls(value: Any, schema: Mapping[str, Any]) -> Any:
    """``value`` without the null fields its schema names but does not require, at any
    depth: hosts often send null for what the model left out, which means the default.
    Free-form objects (no ``properties``) are left as they are."""
    properties = schema.get("properties")
    if not isinstance(value, dict) or not properties:
        return value
    required = set(schema.get("required", ()))
    return {
        k: without_nulls(v, properties.get(k, {}))
        for k, v in value.items()
        if v is not None or k in required or k not in properties
    }


def argument_errors(schema: dict[str, Any], arguments: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What is wrong with ``arguments``, as the API's 422 lists it: ``{loc, msg}`` each,
    ``loc`` naming the argument (a missing or unknown one by its own name)."""
    found = []
    for error in Draft202012Validator(schema).iter_errors(dict(arguments)):
        loc = ["arguments", *error.absolute_path]
        instance = error.instance if isinstance(error.instance, dict) else {}
        if error.validator == "required":
            names = [n for n in error.validator_value if n not in instance]
            found += [{"loc": [*loc, n], "msg": "Field required"} for n in names]
        elif error.validator == "additionalProperties":
            names = sorted(set(instance) - set(error.schema.get("properties", {})))
            found += [{"loc": [*loc, n], "msg": "Extra inputs are not permitted"} for n in names]
        else:
            found.append({"loc": loc, "msg": error.message})
    # jsonschema reports ``required`` once per missing name: each names them all, once.
    unique = {(tuple(str(p) for p in e["loc"]), e["msg"]): e for e in found}
    return sorted(unique.values(), key=lambda item: [str(part) for part in item["loc"]])


class InvalidArguments(ContextopsError):
    """Arguments that do not fit the tool's schema: answered as the API answers a body
    that does not fit, before anything is sent."""

    status, code = 422, "validation_error"

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        names = ", ".join(
            ".".join(str(part) for part in e["loc"][1:]) or "arguments" for e in errors
        )
        super().__init__(f"Invalid arguments: {names}.", body={"errors": errors})


# What the context_pack tool keeps of a pack's dropped items unless asked for all: an agent
# reads its answer in its window, and on a large frame the items left out (each with its
# score) are most of the answer's bytes, ten times the pack's own tokens.
DROPPED_SHOWN = 10


def pack_answer(pack: Any, options: Mapping[str, Any]) -> Any:
    """The context_pack tool's answer: the API's pack, its ``dropped`` cut to the
    DROPPED_SHOWN best-ranked items (the ones closest to getting in) unless ``dropped`` is
    ``all``, with ``dropped_total`` and ``dropped_by_reason`` counting every one."""
    if options.get("dropped") == "all" or not isinstance(pack, dict):
        return pack
    dropped = pack.get("dropped")
    if not isinstance(dropped, list) or len(dropped) <= DROPPED_SHOWN:
        return pack
    by_reason: dict[str, int] = {}
    for item in dropped:
        reason = str(item.get("reason"))
        by_reason[reason] = by_reason.get(reason, 0) + 1
    ranked = sorted(
        (item for item in dropped if item.get("rank") is not None), key=lambda i: i["rank"]
    )
    return {
        **pack,
        "dropped": ranked[:DROPPED_SHOWN],
        "dropped_total": len(dropped),
        "dropped_by_reason": by_reason,
    }


TOOLS: tuple[Tool, ...] = (
    Tool(
        "session_start",
        "POST",
        "/sessions",
        "Start a contextops session for this piece of work (POST /sessions). Returns the "
        "session: pass its `id` as `session_id` to the other tools. `identity` says on whose "
        "behalf you work (its authority decides which facts you read and may supersede), "
        "`context_window_tokens` your model's window (default 200000), `model` its name. "
        "Call it once at the start; to continue an earlier session use session_resume.",
        body={
            "identity": IDENTITY,
            "environment": ENVIRONMENT,
            "context_window_tokens": _int(
                "The model's context window in tokens.", minimum=1000, maximum=10_000_000
            ),
            "model": _str("The model's name, e.g. claude-sonnet-4-6.", maxLength=120),
            "title": _str("A title people see in the dashboard.", maxLength=300),
            "compaction_threshold": {
                "type": "number",
                "exclusiveMinimum": 0,
                "maximum": 1,
                "description": "Window utilization that triggers compaction (default 0.9).",
            },
            "eviction_policy": {
                "type": "string",
                "enum": ["lru", "size_first", "keep_relational", "keep_technical"],
                "description": "What to evict first under pressure (default lru).",
            },
        },
    ),
    Tool(
        "session_resume",
        "GET",
        "/sessions/{session_id}/resume",
        "Rebuild where a session stands (GET /sessions/{id}/resume): the current frame, the "
        "open frame stack root first, pending work (children to settle, suspensions to "
        "resume) and a recovery summary. Call it when you continue a session after a "
        "restart or a lost context, then carry on in `current_frame`.",
        read_only=True,
        path_descriptions={"session_id": SESSION_ID},
    ),
    Tool(
        "session_end",
        "POST",
        "/sessions/{session_id}/end",
        "End the session when the work is done (POST /sessions/{id}/end): its open frames are "
        "cancelled deepest first, its suspensions closed and its working set cleared; returns "
        "the session, `lifecycle_state` ended, with its usage totals and `cost_usd`. An ended "
        "session is read-only: later writes in it answer 409 session_ended, and so does "
        "ending it again. Pop the frames you finished first, so they read completed.",
        destructive=True,
        path_descriptions={"session_id": SESSION_ID},
    ),
    Tool(
        "frame_push",
        "POST",
        "/sessions/{session_id}/frames",
        "Open a frame, a sub-task with its own token budget (POST /sessions/{id}/frames). "
        "`goal` says what it is for, `budget.total` how many tokens it may spend. With "
        "`parent_frame_id` it is a child and its budget comes out of the parent's available "
        "tokens: 409 insufficient_tokens (with `requested` and `available`) when the parent "
        "cannot pay, so ask for less. Returns the frame with its `id` and `budget`; close it "
        "with frame_pop.",
        body={
            "parent_frame_id": _str("The parent frame's id; none for a root frame."),
            "goal": _str("What the frame is for.", minLength=1, maxLength=10_000),
            "inputs": {"type": "object", "description": "The frame's inputs, as JSON."},
            "budget": _obj(
                {
                    "total": _int("Tokens the frame may spend.", minimum=0),
                    "max_subframe_depth": _int(
                        "How deep its children may nest.", minimum=0, maximum=64
                    ),
                },
                ("total",),
            ),
        },
        required=("goal", "budget"),
        path_descriptions={"session_id": SESSION_ID},
    ),
    Tool(
        "frame_pop",
        "POST",
        "/frames/{frame_id}/pop",
        "Close a frame as `completed` or `failed` (POST /frames/{id}/pop), with `result_refs`: "
        "anything JSON that points at what it produced. Its unspent budget returns to the "
        "parent. Pop children before their parent (409 frame_has_open_children).",
        body={
            "status": {"type": "string", "enum": ["completed", "failed"]},
            "result_refs": {
                "type": "array",
                "maxItems": 1000,
                "description": "References to the frame's results (any JSON each).",
            },
            "failure_reason": {
                "type": "string",
                "maxLength": 2000,
                "description": "With `failed`: why, in a sentence; the frame's page shows it.",
            },
        },
        required=("status",),
        path_descriptions={"frame_id": FRAME_ID},
    ),
    Tool(
        "frame_suspend",
        "POST",
        "/frames/{frame_id}/suspend",
        "Pause a frame while it waits on something outside the agent (POST "
        "/frames/{id}/suspend): a person's approval, a long job. Returns a `token` that "
        "resumes it once. With `requires_approval` a person must approve it in the "
        "contextops inbox first; `expires_in_seconds` bounds the wait (then the frame fails).",
        body={
            "reason": _str("Why the frame waits (people read it).", minLength=1, maxLength=5000),
            "requires_approval": {
                "type": "boolean",
                "description": "Whether a person must approve before it resumes.",
            },
            "expires_in_seconds": _int("How long the suspension may last.", minimum=1),
        },
        required=("reason",),
        path_descriptions={"frame_id": FRAME_ID},
    ),
    Tool(
        "usage_record",
        "POST",
        "/frames/{frame_id}/usage",
        "Record one model call's usage (POST /frames/{id}/usage), once per call, right after "
        "its answer, on the frame the call worked for: the token counts from the provider's "
        "`usage` (Anthropic's names), `model` as the provider named it (it prices the call; "
        "default: the session's model) and `message_id`, the provider's response id (e.g. "
        "msg_...): the same id again in the session charges nothing, so a retry is safe. The "
        "frame's `used` rises by the input plus the output; the session's calls, cost and "
        "pressure show the call. Returns the frame with its `budget` and `pressure_level`. "
        "409 frame_not_active for a closed frame, session_ended once the session ended.",
        body={
            "input_tokens": _int(
                "Input tokens not read from or written to the cache.",
                minimum=0,
                maximum=MAX_TOKENS,
            ),
            "output_tokens": _int("Output tokens.", minimum=0, maximum=MAX_TOKENS),
            "cache_creation_input_tokens": _int(
                "Input tokens written to the prompt cache (default 0).",
                minimum=0,
                maximum=MAX_TOKENS,
            ),
            "cache_read_input_tokens": _int(
                "Input tokens read from the prompt cache (default 0).",
                minimum=0,
                maximum=MAX_TOKENS,
            ),
            "model": _str("The model that answered, e.g. claude-sonnet-4-6.", maxLength=120),
            "message_id": _str(
                "The provider's id of the answer (e.g. msg_...): makes the record idempotent.",
                maxLength=200,
            ),
            "started_at": _str("When the call was sent (ISO 8601).", format="date-time"),
            "latency_ms": _int("How long the answer took, in ms.", minimum=0, maximum=86_400_000),
        },
        required=("input_tokens", "output_tokens"),
        path_descriptions={"frame_id": FRAME_ID},
    ),
    Tool(
        "handle_add",
        "POST",
        "/frames/{frame_id}/handles",
        "Put something in a frame's context (POST /frames/{id}/handles): a document, a tool "
        "result, a message, a summary. Give its `content`, or a `ref` (a URL, a file: path) "
        "for what it points to: one of the two is required (422 validation_error otherwise). "
        "`priority` decides what context packs keep under pressure (critical is never cut). "
        "With `state` cold it is discovered, not loaded: it costs the window nothing and packs "
        "list it by name under `resources`. Returns 201 the handle with its `id` and "
        "`estimated_tokens`; context_pack's include_handles and exclude_handles take the id.",
        body={
            "kind": {
                "type": "string",
                "enum": [
                    "system_prompt",
                    "message",
                    "tool_call",
                    "tool_result",
                    "document",
                    "summary",
                ],
                "description": "What it is.",
            },
            "priority": {
                "type": "string",
                "enum": ["critical", "high", "medium", "low", "background"],
                "description": "What to keep first under pressure (default medium).",
            },
            "content": _str("Its text (give it, or a ref).", maxLength=1_000_000),
            "ref": _str("What it points to, e.g. a URL or a file: path.", maxLength=2000),
            "category": _str("A label of your own, e.g. policy or search.", maxLength=40),
            "tool_call_id": _str("The tool call it answers, for a tool_result.", maxLength=200),
            "estimated_tokens": _int(
                "The size of what a ref points to, in tokens (content is counted).",
                minimum=0,
                maximum=MAX_TOKENS,
            ),
            "state": {
                "type": "string",
                "enum": ["loaded", "cold"],
                "description": "loaded (default) puts it in the window; cold registers it only.",
            },
        },
        required=("kind",),
        path_descriptions={"frame_id": FRAME_ID},
    ),
    Tool(
        "context_pack",
        "POST",
        "/sessions/{session_id}/context-pack",
        "Assemble what you should know now within `budget_tokens` (POST "
        "/sessions/{id}/context-pack): a brief context, breadcrumbs of the frame stack, the "
        "facts and working-set items that apply, and segments ranked by relevance to "
        "`query`. `token_summary.used` never exceeds the budget and critical items are never "
        "cut: 409 critical_exceeds_budget when they alone do not fit, so ask for more.",
        body={
            "frame_id": _str("The frame to build it for (default: the top of the stack)."),
            "budget_tokens": _int(
                "Tokens the pack may use (at least 500).", minimum=500, maximum=10_000_000
            ),
            "query": _str("What you are about to do: ranks what is included.", maxLength=2000),
            "include_handles": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Context handles to include whatever their rank.",
            },
            "exclude_handles": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Context handles to leave out.",
            },
            "min_compaction": _str("The least compaction to apply (default none)."),
            "as_of_seq": _int(
                "Replay: the pack the frame would have got right after this event of the "
                "session's log (what the agent saw when it made a call).",
                minimum=1,
            ),
            "valid_at": _str(
                "Valid time (ISO 8601 with a zone): the facts that held then instead of the "
                "current ones; the other sections as now.",
                format="date-time",
            ),
        },
        required=("budget_tokens",),
        path_descriptions={"session_id": SESSION_ID},
        options={
            "dropped": {
                "type": "string",
                "enum": ["best", "all"],
                "description": f"The items left out to list: best (default), the {DROPPED_SHOWN} "
                "ranked closest to getting in, with dropped_total and dropped_by_reason "
                "counting them all; all, every one (a large frame's can be many times the "
                "pack's own size).",
            }
        },
        answer=pack_answer,
    ),
    Tool(
        "fact_write",
        "POST",
        "/facts",
        "Record a fact the organization should remember (POST /facts): `key` names this "
        "version, `subject` what it is about (default: the key without a _v<n> suffix), "
        "`value` any JSON, `source` where it came from. Supersession rules decide whether "
        "it becomes current; read `outcome` (created, superseded, proposal, outdated, "
        "unchanged). Correcting a fact: name it in `supersedes` (403 authority_too_low when "
        "it was written with a higher authority; your write is kept as a proposal).",
        body={
            "key": _str("This version's key, e.g. travel_budget_v2.", minLength=1, maxLength=200),
            "subject": _str("What the fact is about.", maxLength=200),
            "value": {"description": "The fact's value: any JSON except null."},
            "source": _str("policy, finance_system, user, observation, ...", maxLength=120),
            "observed_at": _str(
                "When it was observed (ISO 8601): a later observation wins.", format="date-time"
            ),
            "valid_from": _str(
                "When it started to hold (ISO 8601, default observed_at, else now); a past "
                "time corrects the current value from then on.",
                format="date-time",
            ),
            "memory_type": _str("user, capability or organizational (default: from source)."),
            "scope": _str("global (default), task, hypothetical, draft or session."),
            "scope_id": _str("The task or session a scoped fact belongs to.", maxLength=200),
            "supersedes": _str("The key of the fact this one replaces.", maxLength=200),
            "depends_on": {
                "type": "array",
                "items": {"type": "string"},
                "maxItems": 200,
                "description": "Keys of facts this one was derived from.",
            },
            "is_constraint": {"type": "boolean", "description": "Whether it constrains values."},
            "constraint_type": _str("budget, deadline, capacity, policy, ...", maxLength=40),
            "constraint": {
                "type": "object",
                "description": 'Machine-checkable: {"max": 15, "unit": "%"}, {"min": n}, '
                '{"allowed": [...]}, {"before": "2026-03-01"}.',
            },
            "read_authority": _str("Lowest authority allowed to read it.", maxLength=64),
            "read_permission": _str("A permission a reader must hold.", maxLength=100),
            "utterance": _str("The user's own words the fact came from.", maxLength=5000),
        },
        required=("key", "value", "source"),
    ),
    Tool(
        "fact_current",
        "GET",
        "/facts/{key}/current",
        "The current (valid) version of the chain `key` belongs to (GET /facts/{key}/current). "
        "Check it before relying on a fact you remember: a later write may have superseded "
        "it. 404 not_found when no version of the chain is valid.",
        read_only=True,
        path_descriptions={"key": _str("A fact's key (any version of its chain).")},
    ),
    Tool(
        "fact_lineage",
        "GET",
        "/facts/{key}/lineage",
        "A fact's history (GET /facts/{key}/lineage): its supersession chain oldest first, "
        "each version with the rule that superseded it, and the facts depending on any "
        "version (`needs_review` when a dependency changed).",
        read_only=True,
        path_descriptions={"key": _str("A fact's key (any version of its chain).")},
    ),
    Tool(
        "fact_conflicts",
        "GET",
        "/fact-conflicts",
        "Proposed supersessions waiting for a decision (GET /fact-conflicts), newest first: "
        "pairs of current facts under different subjects that seem to say different things "
        "about one entity, each with both values, the similarity of their vectors and the "
        "words that matched. Nothing is applied until someone decides (fact_conflict_accept, "
        "fact_conflict_reject, fact_conflict_distinct).",
        read_only=True,
    ),
    Tool(
        "fact_conflict_accept",
        "POST",
        "/fact-conflicts/{conflict_id}/accept",
        "Accept a proposed supersession (POST /fact-conflicts/{id}/accept): the proposing fact supersedes the other (rule 2). 403 authority_too_low when your authority, or the proposing fact's writer's, ranks below the other fact's writer; 409 already_decided.",
        path_descriptions={"conflict_id": CONFLICT_ID},
    ),
    Tool(
        "fact_conflict_reject",
        "POST",
        "/fact-conflicts/{conflict_id}/reject",
        "Reject a proposed supersession (POST /fact-conflicts/{id}/reject): both facts stay current and the pair is never proposed again. 409 already_decided.",
        path_descriptions={"conflict_id": CONFLICT_ID},
    ),
    Tool(
        "fact_conflict_distinct",
        "POST",
        "/fact-conflicts/{conflict_id}/distinct",
        "Say the two facts of a proposal are not the same thing (POST /fact-conflicts/{id}/distinct): both stay current and the pair is never proposed again. 409 already_decided.",
        path_descriptions={"conflict_id": CONFLICT_ID},
    ),
    Tool(
        "working_set_put",
        "PUT",
        "/sessions/{session_id}/working-set/{key}",
        "Keep a scratch value for this session under `key` (PUT "
        "/sessions/{id}/working-set/{key}): any JSON, replacing what was there; "
        "`ttl_seconds` makes it expire. Working-set items go into context packs and are "
        "cleared when the session ends.",
        body={
            "value": ANY_JSON,
            "ttl_seconds": _int("Seconds until it expires.", minimum=1, maximum=365 * 24 * 3600),
        },
        required=("value",),
        idempotent=True,
        path_descriptions={"session_id": SESSION_ID, "key": _str("The item's key.")},
    ),
    Tool(
        "working_set_get",
        "GET",
        "/sessions/{session_id}/working-set/{key}",
        "Read a working-set item of the session (GET /sessions/{id}/working-set/{key}): its "
        "value, tokens and expiry; 404 not_found when absent or expired.",
        read_only=True,
        path_descriptions={"session_id": SESSION_ID, "key": _str("The item's key.")},
    ),
    Tool(
        "rlm_state_create",
        "POST",
        "/rlm/states",
        "Start an RLM state for a task (POST /rlm/states): a store of named variables with a "
        "mutation log and checkpoints, `prompt` set, `Final` unset, and a first checkpoint. "
        "Returns 201 the state: pass its `state_id` to rlm_read, rlm_write, rlm_checkpoint "
        "and rlm_rollback. `session_id` ties it to a session (its variables' default scope), "
        "`tree_id` to a task tree shared with other states; with `frame_id`, writing `Final` "
        "pops that frame as completed.",
        body={
            "prompt": _str("The task the state works on.", minLength=1, maxLength=1_000_000),
            "session_id": _str("The session it belongs to.", maxLength=200),
            "tree_id": _str("A task tree shared with other states.", maxLength=40),
            "frame_id": _str("A frame that completes when `Final` is written.", maxLength=200),
            "execution_config": {
                "type": "object",
                "description": "How the task runs (model, limits, ...), as JSON.",
            },
        },
        required=("prompt",),
    ),
    Tool(
        "rlm_read",
        "GET",
        "/rlm/states/{state_id}/variables/{name}",
        "Read variable `name` of an RLM state (GET /rlm/states/{id}/variables/{name}). A "
        "name the state lacks resolves to the newest such variable of a state in the same "
        "task tree, then the same session, then any global one: the answer's `state_id` "
        "names the holder. 404 not_found when none has it.",
        read_only=True,
        path_descriptions={"state_id": STATE_ID, "name": _str("The variable's name.")},
    ),
    Tool(
        "rlm_write",
        "PUT",
        "/rlm/states/{state_id}/variables/{name}",
        "Write variable `name` of an RLM state (PUT /rlm/states/{id}/variables/{name}), "
        "logged as a mutation: `value` any JSON; `scope` decides who else reads it (session "
        "by default, tree, global, or temporary with `ttl_seconds`). Setting `Final` "
        "completes the state. 409 read_only_variable for a read-only one.",
        body={
            "value": ANY_JSON,
            "type": _str("The value's type name (default: from the value).", maxLength=20),
            "description": _str("What the variable holds."),
            "source": _str("Where the value came from.", maxLength=200),
            "read_only": {"type": "boolean", "description": "Refuse later writes."},
            "scope": {
                "type": "string",
                "enum": ["global", "session", "tree", "temporary"],
                "description": "Which other states read it when they lack the name.",
            },
            "ttl_seconds": _int("Seconds a temporary variable lives.", minimum=0),
        },
        required=("value",),
        idempotent=True,
        path_descriptions={"state_id": STATE_ID, "name": _str("The variable's name.")},
    ),
    Tool(
        "rlm_checkpoint",
        "POST",
        "/rlm/states/{state_id}/checkpoints",
        "Snapshot an RLM state under `name` (POST /rlm/states/{id}/checkpoints) before a "
        "risky step; the answer's `checkpoint_id` is what rlm_rollback takes.",
        body={
            "name": _str("The checkpoint's name.", minLength=1, maxLength=200),
            "description": _str("Why it was taken."),
        },
        required=("name",),
        path_descriptions={"state_id": STATE_ID},
    ),
    Tool(
        "rlm_rollback",
        "POST",
        "/rlm/states/{state_id}/rollback",
        "Restore an RLM state exactly as checkpoint `checkpoint_id` left it (POST "
        "/rlm/states/{id}/rollback), logged; returns the state. What changed since the "
        "checkpoint is lost.",
        body={"checkpoint_id": _str("From rlm_checkpoint.", minLength=1, maxLength=40)},
        required=("checkpoint_id",),
        destructive=True,
        path_descriptions={"state_id": STATE_ID},
    ),
)
TOOLS_BY_NAME = {tool.name: tool for tool in TOOLS}


# -- the resources -------------------------------------------------------------------------

SESSION_URI = re.compile(r"^contextops://sessions/(?P<session_id>[^/?#]+)$")
BUDGET_URI = re.compile(r"^contextops://frames/(?P<frame_id>[^/?#]+)/budget$")
RESOURCE_TEMPLATES = (
    types.ResourceTemplate(
        name="session",
        title="A contextops session",
        uri_template="contextops://sessions/{session_id}",
        description="A session's summary: lifecycle state, pressure, top frame, usage totals "
        "and cost (GET /sessions/{id}).",
        mime_type="application/json",
    ),
    types.ResourceTemplate(
        name="frame_budget",
        title="A frame's budget",
        uri_template="contextops://frames/{frame_id}/budget",
        description="A frame's status and token budget: total, used, reserved, allocated to "
        "children, available (from GET /frames/{id}).",
        mime_type="application/json",
    ),
)
RECENT_SESSIONS = 20


def frame_budget(frame: Mapping[str, Any]) -> dict[str, Any]:
    """What ``contextops://frames/{id}/budget`` reads: the frame's budget and what to know
    beside it."""
    return {
        "frame_id": frame.get("id"),
        "session_id": frame.get("session_id"),
        "goal": frame.get("goal"),
        "status": frame.get("status"),
        "pressure_level": frame.get("pressure_level"),
        "budget": frame.get("budget"),
    }


# -- the prompts ---------------------------------------------------------------------------


def _resume_text(session_id: str, reads: Mapping[str, Any], base_url: str) -> str:
    state = reads["resume"]
    stack = state.get("frame_stack") or []
    frames = "\n".join(
        f"{'  ' * i}- {f.get('goal')} ({f.get('status')}, frame_id {f.get('id')}, "
        f"{(f.get('budget') or {}).get('available', '?')} tokens available)"
        for i, f in enumerate(stack)
    )
    pending = "\n".join(
        f"- {w.get('work_type')}: {w.get('description')} (frame_id {w.get('frame_id')})"
        for w in state.get("pending_work") or []
    )
    return (
        f"Resume contextops session {session_id} ({base_url}/sessions/{session_id}/).\n\n"
        f"Recovery summary: {state.get('recovery_summary') or '(none)'}\n\n"
        f"Frame stack, root first (the last is where the work stopped):\n"
        f"{frames or '(no open frame: push one with frame_push)'}\n\n"
        f"Pending work:\n{pending or '(nothing pending)'}\n\n"
        "Carry on from the current frame: finish each pending item first (a tool in "
        "progress: run it again and add its result with handle_add; a suspended frame: "
        "wait for its approval), ask context_pack for what to know, record each model "
        "call with usage_record, and pop each frame with frame_pop when its goal is met."
    )


def _window_text(session_id: str, reads: Mapping[str, Any], base_url: str) -> str:
    pressure = reads["pressure"]
    items = reads["working_set"] or []
    stack = reads["resume"].get("frame_stack") or []
    working = "\n".join(f"- {i.get('key')}: {_dumps(i.get('value'))}" for i in items)
    frames = "\n".join(
        f"{'  ' * i}- {f.get('goal')} ({f.get('status')}): {_dumps(f.get('budget'))}"
        for i, f in enumerate(stack)
    )
    actions = "\n".join(f"- {a}" for a in pressure.get("recommended_actions") or [])
    return (
        f"What is in the context window of contextops session {session_id} "
        f"({base_url}/sessions/{session_id}/):\n\n"
        f"Pressure: {pressure.get('level')}, {pressure.get('occupancy_tokens')} of "
        f"{pressure.get('context_window_tokens')} tokens "
        f"({round(100 * float(pressure.get('utilization') or 0))}%), eviction policy "
        f"{pressure.get('eviction_policy')}.\n\n"
        f"Open frames, root first, with their budgets:\n{frames or '(none)'}\n\n"
        f"Working set:\n{working or '(empty)'}\n\n"
        f"Recommended now:\n{actions or '- nothing: there is room'}\n\n"
        "Use this to decide what to keep, what to page out and what to summarize before "
        "the next model call."
    )


@dataclass(frozen=True)
class Prompt:
    """A prompt a host offers its user: the reads it makes (name, API path with
    ``{session}``) and how their answers become its text."""

    name: str
    title: str
    description: str
    reads: tuple[tuple[str, str], ...]
    render: Any

    def definition(self) -> types.Prompt:
        return types.Prompt(
            name=self.name,
            title=self.title,
            description=self.description,
            arguments=[
                types.PromptArgument(
                    name="session_id",
                    description="The contextops session (its id, from session_start).",
                    required=True,
                )
            ],
        )


PROMPTS = (
    Prompt(
        "resume_session",
        "Resume this session",
        "Where a contextops session stopped: its frame stack, pending work and recovery "
        "summary, with what to do next.",
        (("resume", "/sessions/{session}/resume"),),
        _resume_text,
    ),
    Prompt(
        "whats_in_my_window",
        "What is in my window",
        "The session's context pressure, open frames with their budgets, and working set.",
        (
            ("pressure", "/sessions/{session}/pressure"),
            ("working_set", "/sessions/{session}/working-set"),
            ("resume", "/sessions/{session}/resume"),
        ),
        _window_text,
    ),
)
PROMPTS_BY_NAME = {prompt.name: prompt for prompt in PROMPTS}


# -- the server ----------------------------------------------------------------------------


def error_json(error: ContextopsError) -> dict[str, Any]:
    """The API's error body for ``error`` (``error`` and ``detail`` always there), with the
    HTTP status beside them."""
    body: dict[str, Any] = {"error": error.code, "detail": error.detail, **error.body}
    if error.status is not None:
        body.setdefault("status", error.status)
    return body


def _dumps(data: Any) -> str:
    # One line: what an agent reads costs tokens, and indentation is most of a small answer.
    return json.dumps(data, ensure_ascii=False)


def tool_result(data: Any, *, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=_dumps(data))],
        structured_content=data if isinstance(data, dict) else {"result": data},
        is_error=is_error,
    )


class Contextops:
    """The MCP server's way to the API: ``base_url`` with ``api_key`` (stdio), or with the
    key each HTTP request was authenticated with (``api_key`` None)."""

    def __init__(self, base_url: str | None, api_key: str | None = None) -> None:
        self.base_url = split_base_url(base_url)
        self.api_key = api_key
        self.http = httpx.AsyncClient(timeout=30.0, headers={"User-Agent": USER_AGENT})

    def client(self, key: str) -> AsyncClient:
        return AsyncClient(self.base_url, key, http_client=self.http)

    def key_for(self, ctx: ServerRequestContext[Any, Any]) -> str:
        """The key of the caller: over HTTP the one its request was authenticated with,
        never the command's own; over stdio the command's."""
        request = ctx.request
        if request is not None and "user" in getattr(request, "scope", {}):
            user = request.scope["user"]
            if isinstance(user, AuthenticatedUser):
                return user.access_token.token
            raise Unauthenticated("This request carries no API key.")
        if self.api_key:
            return self.api_key
        raise Unauthenticated("No API key: set CONTEXTOPS_API_KEY or pass --api-key.")

    async def call(
        self,
        ctx: ServerRequestContext[Any, Any],
        method: str,
        path: str,
        body: Any = None,
        params: dict[str, Any] | None = None,
    ) -> Any:
        """The API's answer to ``method path`` with the caller's key; raises its error."""
        client = self.client(self.key_for(ctx))
        return await client.transport.request(method, path, json=body, params=params)

    async def aclose(self) -> None:
        await self.http.aclose()

    # -- handlers --------------------------------------------------------------------------

    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool.definition() for tool in TOOLS])

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        tool = TOOLS_BY_NAME.get(params.name)
        if tool is None:
            known = ", ".join(TOOLS_BY_NAME)
            return tool_result(
                {
                    "error": "unknown_tool",
                    "detail": f"No tool {params.name!r}; the tools are {known}.",
                },
                is_error=True,
            )
        try:
            path, body = tool.request(params.arguments or {})
            data = await self.call(ctx, tool.method, path, body)
        except ContextopsError as error:
            return tool_result(error_json(error), is_error=True)
        data = tool.answered(data, tool.arguments(params.arguments or {}))
        return tool_result(self.absolute_urls(data))

    def absolute_urls(self, data: Any) -> Any:
        """``data`` with its ``dashboard_url`` (a path in the API's answer) made absolute:
        the host shows it to a person, who cannot open a path."""
        url = data.get("dashboard_url") if isinstance(data, dict) else None
        if isinstance(url, str) and url.startswith("/"):
            return {**data, "dashboard_url": self.base_url + url}
        return data

    # -- prompts ---------------------------------------------------------------------------

    async def list_prompts(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[prompt.definition() for prompt in PROMPTS])

    async def get_prompt(
        self, ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        prompt = PROMPTS_BY_NAME.get(params.name)
        if prompt is None:
            raise MCPError(
                types.INVALID_PARAMS,
                f"No prompt {params.name!r}; the prompts are {', '.join(PROMPTS_BY_NAME)}.",
                {"name": params.name},
            )
        arguments = dict(params.arguments or {})
        session_id = str(arguments.get("session_id") or "").strip()
        if not session_id:
            raise MCPError(
                types.INVALID_PARAMS,
                f"The prompt {prompt.name} needs the argument session_id.",
                {"name": prompt.name, "missing": ["session_id"]},
            )
        seg = quote(session_id, safe="")
        try:
            reads = {
                name: await self.call(ctx, "GET", path.format(session=seg))
                for name, path in prompt.reads
            }
        except ContextopsError as error:
            raise _resource_error(error, f"prompt:{prompt.name}") from error
        text = prompt.render(session_id, reads, self.base_url)
        return types.GetPromptResult(
            description=prompt.description,
            messages=[
                types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))
            ],
        )

    async def list_resource_templates(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=list(RESOURCE_TEMPLATES))

    async def list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        """The organization's most recent sessions, so a host can offer them by name."""
        try:
            page = await self.call(ctx, "GET", "/sessions", params={"limit": RECENT_SESSIONS})
        except ContextopsError as error:
            raise _resource_error(error, "contextops://sessions") from error
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    name=f"session {item['id']}",
                    title=item.get("title") or f"Session {item['id']}",
                    uri=f"contextops://sessions/{item['id']}",
                    description=f"{item.get('lifecycle_state')}, pressure "
                    f"{(item.get('pressure') or {}).get('level')}",
                    mime_type="application/json",
                )
                for item in page.get("items", [])
            ]
        )

    async def read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        try:
            if match := SESSION_URI.match(uri):
                seg = quote(match["session_id"], safe="")
                data = await self.call(ctx, "GET", f"/sessions/{seg}")
            elif match := BUDGET_URI.match(uri):
                seg = quote(match["frame_id"], safe="")
                data = frame_budget(await self.call(ctx, "GET", f"/frames/{seg}"))
            else:
                raise MCPError(
                    types.INVALID_PARAMS,
                    f"Unknown resource {uri}: contextops://sessions/{{session_id}} and "
                    "contextops://frames/{frame_id}/budget are served.",
                    {"uri": uri},
                )
        except ContextopsError as error:
            raise _resource_error(error, uri) from error
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(uri=uri, mime_type="application/json", text=_dumps(data))
            ]
        )

    def server(self) -> Server[Any]:
        return Server(
            SERVER_NAME,
            version=USER_AGENT.rsplit("/", 1)[-1],
            title="contextops",
            instructions=INSTRUCTIONS,
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            on_list_resources=self.list_resources,
            on_list_resource_templates=self.list_resource_templates,
            on_read_resource=self.read_resource,
            on_list_prompts=self.list_prompts,
            on_get_prompt=self.get_prompt,
        )


def _resource_error(error: ContextopsError, uri: str) -> MCPError:
    """An API error reading a resource: a protocol error (resources have no error result)
    whose message is the API's sentence and whose data its JSON."""
    code = (
        types.INVALID_PARAMS if error.status and 400 <= error.status < 500 else types.INTERNAL_ERROR
    )
    return MCPError(code, str(error), {**error_json(error), "uri": uri})


# -- HTTP: each caller's own key -----------------------------------------------------------


class ApiKeyVerifier:
    """Accepts a bearer token the contextops server accepts as an API key (asked with a
    one-item session list, remembered for :data:`KEY_CHECK_TTL` seconds)."""

    def __init__(self, contextops: Contextops, ttl: float = KEY_CHECK_TTL) -> None:
        self.contextops = contextops
        self.ttl = ttl
        self._accepted: dict[str, float] = {}

    async def verify_token(self, token: str) -> AccessToken | None:
        digest = hashlib.sha256(token.encode()).hexdigest()
        now = time.monotonic()
        if self._accepted.get(digest, 0.0) <= now:
            self._accepted = {k: until for k, until in self._accepted.items() if until > now}
            try:
                await self.contextops.client(token).transport.request(
                    "GET", "/sessions", params={"limit": 1}
                )
            except Unauthenticated:
                return None
            except ContextopsError as error:
                if error.status is None:  # the server is unreachable: nothing to vouch for it
                    logger.warning("could not check an API key: %s", error)
                    return None
                # Any other refusal (rate limit, permission) still means the key is real.
            self._accepted[digest] = now + self.ttl
        return AccessToken(token=token, client_id=f"key-{digest[:16]}", scopes=[])


def http_app(contextops: Contextops, *, host: str) -> Any:
    """The Streamable HTTP app at :data:`HTTP_PATH`, answering 401 to a request without a
    key the contextops server accepts."""
    return contextops.server().streamable_http_app(
        streamable_http_path=HTTP_PATH,
        host=host,
        # No OAuth here: the bearer token is a contextops API key. issuer_url is required
        # by the settings but only advertised with an authorization server, which is absent.
        auth=AuthSettings(issuer_url=contextops.base_url, resource_server_url=None),  # type: ignore[arg-type]
        token_verifier=ApiKeyVerifier(contextops),
    )


async def _serve_http(base_url: str | None, host: str, port: int) -> None:
    contextops = Contextops(base_url)
    try:
        config = uvicorn.Config(
            http_app(contextops, host=host), host=host, port=port, log_level="info"
        )
        print(
            f"contextops MCP server for {contextops.base_url}: http://{host}:{port}{HTTP_PATH} "
            "(Streamable HTTP; send Authorization: Bearer <your contextops API key>)",
            file=sys.stderr,
            flush=True,
        )
        await uvicorn.Server(config).serve()
    finally:
        await contextops.aclose()


async def _serve_stdio(base_url: str | None, api_key: str) -> None:
    contextops = Contextops(base_url, api_key)
    server = contextops.server()
    try:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        await contextops.aclose()


def serve_stdio(base_url: str | None, api_key: str) -> None:
    """Serve MCP over this process's stdin and stdout until the host closes them."""
    asyncio.run(_serve_stdio(base_url, api_key))


def serve_http(base_url: str | None, *, host: str = "127.0.0.1", port: int = DEFAULT_PORT) -> None:
    """Serve MCP over Streamable HTTP at ``http://host:port/mcp`` until interrupted."""
    asyncio.run(_serve_http(base_url, host, port))


__all__ = ["PROMPTS", "TOOLS", "Contextops", "http_app", "serve_http", "serve_stdio"]
