"""``contextops``: the command line of contextops.

    contextops import PATH...              transcripts → sessions (Claude Code, Anthropic, OpenAI)
    contextops import --claude-projects    every Claude Code session under ~/.claude/projects
    contextops sessions                    the organization's sessions, newest first
    contextops tail SESSION                the session's events as they happen
    contextops pack SESSION [--budget N]   a context pack: every item in and out, its score, why
    contextops approve TOKEN / reject TOKEN --note ...   decide a suspension (a person's key)
    contextops export rlm STATE_ID         an RLM state as a seed-schema document
    contextops claude-hook                 for Claude Code's hooks (see contextops_client.hook)
    contextops mcp [--http --port N]       an MCP server for Claude Code and other hosts

The server and key come from ``--url`` / ``--api-key`` or ``CONTEXTOPS_URL`` /
``CONTEXTOPS_API_KEY``. An API error prints its code and detail and exits 1.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from .errors import ContextopsError
from .hook import CLAUDE_CODE, Source, claude_code_sources, hook_main, upload
from .sync import Client
from .types import ContextPack, Event, ImportJob, ImportQueued, SessionData

FORMATS = ("claude_code", "anthropic", "openai")
SUFFIX_FORMATS = {".jsonl": CLAUDE_CODE, ".yaml": "anthropic", ".yml": "anthropic"}
TRANSCRIPT_SUFFIXES = (".jsonl", ".json", ".yaml", ".yml")
CLAUDE_PROJECTS = "~/.claude/projects"
FINISHED = frozenset({"completed", "failed"})
EVENT_PAGE = 500
# A session that ended has nothing more to tell, unless an import reopens it.
SESSION_ENDED = "session.ended"
SESSION_REOPENED = "session.reopened"
# A suspension token is URL-safe base64 and may begin with "-": taken as the token, not an option.
TOKEN_COMMAND = {"ignore_unknown_options": True}


class ApiFailure(click.ClickException):
    """An API error as the command line shows it: ``Error: 403 permission_denied: ...``."""

    def __init__(self, error: ContextopsError) -> None:
        super().__init__(str(error))
        self.error = error


class ApiGroup(click.Group):
    """The ``contextops`` group: an API error in any command ends it with its message."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ContextopsError as error:
            raise ApiFailure(error) from error


@dataclass
class Settings:
    url: str | None
    api_key: str | None

    def client(self, **options: Any) -> Client:
        return Client(self.url, self.api_key, **options)


@click.group(cls=ApiGroup)
@click.option(
    "--url",
    envvar="CONTEXTOPS_URL",
    default=None,
    metavar="URL",
    help="The server (default $CONTEXTOPS_URL, else http://127.0.0.1:8000).",
)
@click.option(
    "--api-key",
    envvar="CONTEXTOPS_API_KEY",
    default=None,
    metavar="KEY",
    help="The API key (default $CONTEXTOPS_API_KEY).",
)
@click.pass_context
def main(ctx: click.Context, url: str | None, api_key: str | None) -> None:
    """contextops from a terminal: import transcripts, follow sessions, decide suspensions."""
    ctx.obj = Settings(url=url, api_key=api_key)


# -- import ----------------------------------------------------------------------------------


def transcript_files(path: Path, *, claude_only: bool = False) -> list[Path]:
    """The transcripts ``path`` names: itself when a file; in a folder, every transcript
    below it (Claude Code's only with ``claude_only``), never a ``subagents/`` file, which
    goes with its session."""
    if path.is_file():
        return [path]
    suffixes = (".jsonl",) if claude_only else TRANSCRIPT_SUFFIXES
    return sorted(
        found
        for found in path.rglob("*")
        if found.is_file() and found.suffix in suffixes and "subagents" not in found.parts
    )


def transcript_sources(path: Path, fmt: str | None) -> tuple[list[Source], str | None]:
    """What :func:`upload` sends for ``path`` and the format to name: Claude Code JSONL
    with its subagent files, in whole lines; any other transcript as one document."""
    fmt = fmt or SUFFIX_FORMATS.get(path.suffix)
    if fmt == CLAUDE_CODE:
        return claude_code_sources(path), fmt
    return [Source(path, path.name, whole_lines=False)], fmt


@dataclass
class Imported:
    """One file's import as the command reports it."""

    path: Path
    jobs: list[ImportQueued]
    seen: list[ImportJob]

    @property
    def last(self) -> ImportJob | None:
        return self.seen[-1] if self.seen else None

    @property
    def failure(self) -> dict[str, Any] | None:
        for job in self.seen:
            if job.get("status") == "failed":
                return dict(job.get("error") or {"error": "failed", "detail": "The import failed."})
        if not self.seen or any(job.get("status") not in FINISHED for job in self.seen):
            return {"error": "timeout", "detail": "The import did not finish in time."}
        return None

    @property
    def result(self) -> dict[str, Any] | None:
        """The last job's result (the session as it stands), ``unchanged`` only when no
        part of the upload changed anything: a large file goes in several parts, and its
        last part alone finds the work done by the parts before it."""
        result = self.last.get("result") if self.last else None
        if not result:
            return None
        parts: list[Mapping[str, object]] = [job.get("result") or {} for job in self.seen]
        return {**result, "unchanged": all(part.get("unchanged") for part in parts)}


def _progress(ops: Client, path: Path, jobs: list[ImportQueued], timeout: float) -> list[ImportJob]:
    """Poll the jobs until each finished (or ``timeout``), with a progress bar on stderr
    over the entries the worker has written."""
    deadline = time.monotonic() + timeout
    seen: dict[str, ImportJob] = {}
    with click.progressbar(
        length=1, label=path.name, file=sys.stderr, show_pos=True, show_eta=False
    ) as bar:
        while True:
            for job in jobs:
                known = seen.get(job["id"])
                if known is None or known.get("status") not in FINISHED:
                    seen[job["id"]] = ops.import_get(job)
            done = sum(job["progress"]["done"] for job in seen.values())
            total = sum(job["progress"]["total"] for job in seen.values())
            finished = all(job.get("status") in FINISHED for job in seen.values())
            bar.length = max(total, 1)
            # Parts imported side by side may share entries: a finished import is whole.
            bar.update(max(0, (bar.length if finished else min(done, bar.length)) - bar.pos))
            if finished:
                break
            if time.monotonic() >= deadline:
                break
            time.sleep(0.25)
    return [seen[job["id"]] for job in jobs]


def _summary_line(item: Imported) -> str:
    result = item.result or {}
    again = " It had been imported before: nothing changed." if result.get("unchanged") else ""
    return (
        f"Imported {item.path.name} as session {result.get('session_id')}: "
        f"{result.get('frames', 0)} frames, {result.get('turns', 0)} turns, "
        f"{result.get('api_calls', 0)} model calls, {result.get('tool_calls', 0)} tool calls "
        f"({result.get('tool_errors', 0)} failed), {result.get('compactions', 0)} compactions, "
        f"{result.get('skipped_lines', 0)} lines skipped.{again}"
    )


@main.command("import")
@click.argument("paths", nargs=-1, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--claude-projects",
    "projects",
    is_flag=False,
    flag_value=CLAUDE_PROJECTS,
    default=None,
    metavar="[DIR]",
    help=f"Import every Claude Code session under DIR (default {CLAUDE_PROJECTS}).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default=None,
    help="The transcripts' format (default: .jsonl is Claude Code, the server tells the rest).",
)
@click.option("--title", default=None, help="The session's title (default: its first prompt).")
@click.option(
    "--json", "as_json", is_flag=True, help="Print the summary import_transcript --json prints."
)
@click.option(
    "--timeout", default=600.0, show_default=True, help="Seconds to wait for each import."
)
@click.pass_obj
def import_command(
    settings: Settings,
    paths: tuple[Path, ...],
    projects: str | None,
    fmt: str | None,
    title: str | None,
    as_json: bool,
    timeout: float,
) -> None:
    """Import transcripts as sessions: Claude Code JSONL (with its subagents/ folder),
    Anthropic and OpenAI transcripts; a folder imports every transcript in it.

    The same transcript imported again changes nothing; one that grew since adds only
    what is new to its session."""
    files: list[Path] = []
    for path in paths:
        files += transcript_files(path)
    if projects is not None:
        folder = Path(projects).expanduser()
        if not folder.is_dir():
            raise click.BadParameter(f"{folder} is not a folder.", param_hint="--claude-projects")
        files += transcript_files(folder, claude_only=True)
    if not files:
        raise click.UsageError("Name transcripts or folders to import, or --claude-projects.")
    files = list(dict.fromkeys(files))
    done: list[Imported] = []
    with settings.client() as ops:
        queued: list[tuple[Path, list[ImportQueued]]] = []
        for path in files:  # all sent first: the workers import them side by side
            sources, name = transcript_sources(path, fmt)
            try:
                queued.append((path, upload(ops, sources, format=name, title=title).jobs))
            except ContextopsError as error:
                if len(files) == 1:
                    raise
                click.echo(f"{path}: {error}", err=True)
                done.append(Imported(path, [], []))
        for path, jobs in queued:
            done.append(Imported(path, jobs, _progress(ops, path, jobs, timeout)))
    done.sort(key=lambda item: files.index(item.path))
    failed = 0
    answers: list[dict[str, Any]] = []
    for item in done:
        failure = item.failure if item.jobs else {"error": "not_sent", "detail": "Not sent."}
        if failure is not None:
            failed += 1
            click.echo(f"{item.path}: {failure.get('error')}: {failure.get('detail')}", err=True)
            answers.append({"file": str(item.path), **failure})
            continue
        result = item.result or {}
        answers.append(result)
        for skipped in result.get("skipped") or []:
            click.echo(f"skipped {skipped.get('reason')}", err=True)
        if not as_json:
            click.echo(_summary_line(item))
    if as_json:
        click.echo(json.dumps(answers[0] if len(files) == 1 else answers, indent=2))
    if failed:
        sys.exit(1)


# -- sessions, tail ----------------------------------------------------------------------


def _when(value: str | None) -> str:
    if not value:
        return ""
    try:
        return datetime.fromisoformat(value).strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return value


def _cut(text: str, width: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _table(rows: Sequence[tuple[str, ...]], numeric: frozenset[int] = frozenset()) -> Iterator[str]:
    """``rows`` (a header first) in aligned columns, the ``numeric`` ones to the right."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = [
            cell.rjust(width) if i in numeric else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        yield "  ".join(cells).rstrip()


def session_rows(items: list[SessionData]) -> Iterator[str]:
    """The sessions as a table: id, start, state, model calls, agent and title."""
    rows = [("ID", "STARTED", "STATE", "CALLS", "AGENT", "TITLE")]
    for item in items:
        data: dict[str, Any] = dict(item)
        rows.append(
            (
                str(data.get("id", "")),
                _when(data.get("started_at") or data.get("created_at")),
                str(data.get("lifecycle_state", "")),
                str(data.get("api_calls", "")),
                _cut(data.get("agent") or "", 20),
                _cut(data.get("title") or "", 60),
            )
        )
    yield from _table(rows)


@main.command()
@click.option("--search", default=None, help="Sessions whose title or id contains this.")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 500))
@click.option("--offset", default=0, type=click.IntRange(0))
@click.option("--json", "as_json", is_flag=True, help="Print the API's answer.")
@click.pass_obj
def sessions(
    settings: Settings, search: str | None, limit: int, offset: int, as_json: bool
) -> None:
    """The organization's sessions, newest first."""
    with settings.client() as ops:
        page = ops.sessions(search=search, limit=limit, offset=offset)
    if as_json:
        click.echo(json.dumps(page, indent=2))
        return
    for line in session_rows(page["items"]):
        click.echo(line)
    shown = offset + len(page["items"])
    more = f"; --offset {page['next_offset']} for more" if page.get("next_offset") else ""
    click.echo(f"{shown} of {page['count']} sessions{more}.", err=True)


def event_line(event: Event) -> str:
    """One event as ``tail`` prints it: sequence, time, type, actor and what it carried."""
    when = event.get("created_at") or ""
    try:
        when = datetime.fromisoformat(when).strftime("%H:%M:%S")
    except ValueError:
        pass
    payload = json.dumps(event.get("payload") or {}, ensure_ascii=False, separators=(",", ":"))
    frame = str(event.get("frame_id") or "")[:8]
    return (
        f"{event['seq']:>6}  {when}  {event['type']:<24} {_cut(event.get('actor', ''), 24):<24} "
        f"{frame:<8}  {_cut(payload, 120)}"
    )


@main.command()
@click.argument("session_id")
@click.option("--after", default=0, type=click.IntRange(0), help="Start after this event.")
@click.option("--once", is_flag=True, help="Print the events there are and stop.")
@click.option("--interval", default=1.0, show_default=True, help="Seconds between polls.")
@click.option("--json", "as_json", is_flag=True, help="One event's JSON per line.")
@click.pass_obj
def tail(
    settings: Settings, session_id: str, after: int, once: bool, interval: float, as_json: bool
) -> None:
    """The session's events as they happen, until the session ends (or Ctrl-C).

    Ctrl-C stops it between two reads, never inside one: an interrupt raised in the
    middle of a request can leave the HTTP connection pool locked, and closing the client
    would then wait forever."""
    stop = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        with settings.client() as ops:
            while not stop.is_set():
                events = ops.events(session_id, after=after, limit=EVENT_PAGE)
                for event in events:
                    line = json.dumps(event, ensure_ascii=False) if as_json else event_line(event)
                    click.echo(line)
                    after = max(after, int(event["seq"]))
                ends = [e["type"] for e in events if e["type"] in (SESSION_ENDED, SESSION_REOPENED)]
                if ends and ends[-1] == SESSION_ENDED:
                    return
                if len(events) >= EVENT_PAGE:
                    continue
                if once:
                    return
                stop.wait(interval)
    finally:
        signal.signal(signal.SIGINT, previous)


# -- pack ----------------------------------------------------------------------------------

DEFAULT_PACK_BUDGET = 4000
# The sections of a pack's answer that list items: what the table calls each kind (a
# segment says its own), its id's field, and the reason where the answer gives none.
PACK_SECTIONS = (
    ("breadcrumbs", "frame", "frame_id", "essential"),
    ("segments", "", "handle_id", ""),
    ("facts", "fact", "id", ""),
    ("working_set", "working", "key", ""),
    ("resources", "resource", "handle_id", "cold"),
)
# What the table calls a dropped item of each section (``dropped`` names no handle's kind).
DROPPED_KINDS = {
    "breadcrumbs": "frame",
    "segments": "handle",
    "facts": "fact",
    "working_set": "working",
    "resources": "resource",
}
# The parts of an item's score, in the order docs/retrieval.md gives them: they add up to
# its total (``older`` is a penalty, below zero only for an older near-duplicate).
SCORE_PARTS = ("priority", "lexical", "semantic", "recency", "attention", "neighbour", "older")
PACK_HEADER = (
    "RANK",
    "KIND",
    "ID",
    "TOKENS",
    "FORM",
    "SCORE",
    *(part.upper() for part in SCORE_PARTS),
    "REASON",
)
# Rank, tokens, the score and its parts: right-aligned.
PACK_NUMERIC = frozenset({0, 3, 5, *range(6, 6 + len(SCORE_PARTS))})
# Included items that are in before the ranking, unranked (the packer's required items).
PACK_REQUIRED = frozenset({"critical", "forced", "constraint", "essential"})
OUT = "out"  # the FORM of an item the pack left out


def _short_id(value: object) -> str:
    """An id named in a few characters, as the pack pages name a newer near-duplicate."""
    text = str(value)
    return text if len(text) <= 12 else f"{text[:8]}…"


def _pack_row(
    data: Mapping[str, Any], kind: str, item_id: str, form: str, reason: str
) -> tuple[str, ...]:
    """One item's row: its rank (``-`` when unranked), what it is, its tokens, its form
    (``out`` when left out), its score and each part (``-`` when unscored), and why."""
    rank, score = data.get("rank"), data.get("score")
    figures = (
        [f"{float(score.get(name) or 0):.3f}" for name in ("total", *SCORE_PARTS)]
        if score
        else ["-"] * (1 + len(SCORE_PARTS))
    )
    if data.get("older_than"):
        reason = f"{reason}; older than {_short_id(data['older_than'])}"
    return (
        "-" if rank is None else str(rank),
        kind,
        item_id,
        str(data.get("tokens", 0)),
        form,
        *figures,
        reason,
    )


def _pack_place(rank: int | None, included: bool, reason: str) -> tuple[int, int]:
    """Where a row goes, as on the pack pages: the required items first (in the order the
    pack took them), then by rank, then the other unranked ones (resources by name, items
    left out before the ranking)."""
    if rank is not None:
        return 1, rank
    return (0 if included and reason in PACK_REQUIRED else 2), 0


def pack_rows(pack: ContextPack) -> Iterator[str]:
    """Every item of the pack, in or out, as a table: the required ones first (no rank),
    then by rank; each with its form (``out`` when left out), its score and the parts that
    add up to it, and its reason."""
    answer: dict[str, Any] = dict(pack)
    items: list[tuple[tuple[int, int], tuple[str, ...]]] = []
    for section, kind, id_field, default_reason in PACK_SECTIONS:
        for item in answer.get(section) or []:
            data: dict[str, Any] = dict(item)
            reason = str(data.get("reason") or default_reason or "-")
            row = _pack_row(
                data,
                kind or str(data.get("kind", "")),
                str(data.get(id_field, "")),
                str(data.get("form") or "-"),
                reason,
            )
            items.append((_pack_place(data.get("rank"), True, reason), row))
    for item in answer.get("dropped") or []:
        data = dict(item)
        section = str(data.get("section", ""))
        reason = str(data.get("reason") or "-")
        kind = DROPPED_KINDS.get(section, section)
        row = _pack_row(data, kind, str(data.get("id", "")), OUT, reason)
        items.append((_pack_place(data.get("rank"), False, reason), row))
    rows = [row for _, row in sorted(items, key=lambda i: i[0])]
    yield from _table([PACK_HEADER, *rows], PACK_NUMERIC)


def pack_totals(pack: ContextPack) -> str:
    """``used 1,234 of 4,000 tokens (2,766 left), compaction_level none, verbose; 3 dropped``."""
    summary = pack["token_summary"]
    dropped = len(pack.get("dropped") or [])
    return (
        f"used {summary['used']:,} of {summary['budget']:,} tokens "
        f"({summary['remaining']:,} left), compaction_level {summary['compaction_level']}, "
        f"format {pack.get('format')}; {dropped} dropped"
    )


@main.command()
@click.argument("session_id")
@click.option(
    "--budget",
    default=DEFAULT_PACK_BUDGET,
    show_default=True,
    type=int,
    help="The pack's budget in tokens (at least 500).",
)
@click.option("--query", default=None, help="What the agent is about to do: ranks the items.")
@click.option("--frame", "frame_id", default=None, help="The frame (default: the session's top).")
@click.option("--json", "as_json", is_flag=True, help="Print the API's answer.")
@click.pass_obj
def pack(
    settings: Settings,
    session_id: str,
    budget: int,
    query: str | None,
    frame_id: str | None,
    as_json: bool,
) -> None:
    """A context pack of SESSION (POST /sessions/{id}/context-pack): every item, in or
    out, what it used of the budget, and how hard it was compacted. The pack is
    recorded, as an agent's would be.

    Each row: the item's rank (- for the required items, in before the ranking), kind,
    id, tokens, form (out when the pack left it out), its score and the parts that add
    up to it (PRIORITY + LEXICAL + SEMANTIC + RECENCY + ATTENTION + NEIGHBOUR + OLDER,
    a penalty for an older near-duplicate), and its reason."""
    with settings.client() as ops:
        answer = ops.context_pack(session_id, budget_tokens=budget, query=query, frame=frame_id)
    if as_json:
        click.echo(json.dumps(answer, indent=2))
        return
    for line in pack_rows(answer):
        click.echo(line)
    click.echo(pack_totals(answer))


# -- approve, reject ---------------------------------------------------------------------


def _decided(suspension: Any, as_json: bool) -> None:
    data = suspension.data
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    note = f" ({data['decision_note']})" if data.get("decision_note") else ""
    if data.get("status") == "approved":
        click.echo(
            f"Approved by {data.get('decided_by')}{note}: frame {data.get('frame_id')} may resume."
        )
    else:
        click.echo(
            f"Rejected by {data.get('decided_by')}{note}: frame {data.get('frame_id')} has failed."
        )


@main.command(context_settings=TOKEN_COMMAND)
@click.argument("token")
@click.option("--note", default="", help="Why (shown with the decision).")
@click.option("--json", "as_json", is_flag=True, help="Print the suspension's JSON.")
@click.pass_obj
def approve(settings: Settings, token: str, note: str, as_json: bool) -> None:
    """Approve a suspended frame: its agent may resume. Needs your own key
    (manage.py create_api_key --user YOU) and the right to approve."""
    with settings.client() as ops:
        _decided(ops.suspension_approve(token, note=note), as_json)


@main.command(context_settings=TOKEN_COMMAND)
@click.argument("token")
@click.option("--note", required=True, help="Why (required, as in the inbox).")
@click.option("--json", "as_json", is_flag=True, help="Print the suspension's JSON.")
@click.pass_obj
def reject(settings: Settings, token: str, note: str, as_json: bool) -> None:
    """Reject a suspended frame: it fails with the note as its reason. Needs your own key
    and the right to approve."""
    with settings.client() as ops:
        _decided(ops.suspension_reject(token, note=note), as_json)


# -- export --------------------------------------------------------------------------------


@main.group()
def export() -> None:
    """Export an object as a document."""


@export.command("rlm")
@click.argument("state_id")
@click.option(
    "-o",
    "--output",
    type=click.File("w", encoding="utf-8", atomic=True),
    default="-",
    help="Write to this file (default: stdout).",
)
@click.pass_obj
def export_rlm(settings: Settings, state_id: str, output: Any) -> None:
    """An RLM state as the seed-schema document (GET /rlm/states/{id}/export), which
    POST /rlm/states/import takes back."""
    with settings.client() as ops:
        document = ops.rlm_state_export(state_id)
    output.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")


# -- the Claude Code hook ----------------------------------------------------------------


@main.command("claude-hook")
@click.option("--background", is_flag=True, hidden=True)
@click.pass_obj
def claude_hook(settings: Settings, background: bool) -> None:
    """For Claude Code's hooks (SessionStart, Stop, SubagentStop, PreCompact, SessionEnd):
    sends what the session's transcript gained since the last call. Prints nothing, logs
    to ~/.contextops/hook.log ($CONTEXTOPS_HOOK_LOG) and always exits 0."""
    sys.exit(
        hook_main(sys.stdin, url=settings.url, api_key=settings.api_key, background=background)
    )


# -- the MCP server ----------------------------------------------------------------------

MCP_MODULES = frozenset({"mcp", "mcp_types", "uvicorn", "starlette", "anyio", "jsonschema"})


@main.command("mcp")
@click.option(
    "--http",
    "over_http",
    is_flag=True,
    help="Serve Streamable HTTP at http://HOST:PORT/mcp instead of stdio; each request "
    "authenticates with its caller's own key (Authorization: Bearer <key>).",
)
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="With --http: where to listen."
)
@click.option(
    "--port",
    default=8765,
    show_default=True,
    type=click.IntRange(1, 65535),
    help="With --http: the port.",
)
@click.pass_obj
def mcp_command(settings: Settings, over_http: bool, host: str, port: int) -> None:
    """Serve contextops to an MCP host (Claude Code, Claude Desktop, ...): tools for
    sessions, frames, context packs, facts, the working set and RLM state, and resources
    for a session's summary and a frame's budget.

    Over stdio by default, with --api-key / $CONTEXTOPS_API_KEY, as Claude Code runs it:

    \b
        claude mcp add contextops -- contextops mcp

    With --http, one server for remote hosts: every request brings its caller's own key,
    and a request without one the contextops server accepts answers 401."""
    try:
        # mcp.py needs the SDK of the optional `mcp` extra: loaded only when serving.
        from . import mcp as mcp_server
    except ImportError as error:
        if (error.name or "").split(".")[0] not in MCP_MODULES:
            raise
        raise click.ClickException(
            f'The MCP server needs the mcp extra: pip install "contextops-client[mcp]" ({error}).'
        ) from error
    if over_http:
        mcp_server.serve_http(settings.url, host=host, port=port)
        return
    if not settings.api_key:
        raise click.UsageError("No API key: set CONTEXTOPS_API_KEY or pass --api-key.")
    mcp_server.serve_stdio(settings.url, settings.api_key)


if __name__ == "__main__":
    main()
