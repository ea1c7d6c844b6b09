"""Loading LoCoMo conversations through the JSON API and asking for a context pack per
question: the measuring part of ``make bench-recall``.

Each conversation is loaded in up to three ways, each in an organization of its own:

- ``handles``: one session, one frame, each turn a ``message`` handle (priority left at
  its default), in conversation order;
- ``facts``: one session and frame, each observation a fact ``obs-<n>`` whose value is
  the observation; no handles;
- ``both``: the turns as handles and the observations as facts in one session, written
  session by session (a session's turns, then its observations);
- ``documents``: each of the conversation's sessions one ``document`` handle (its turns,
  a line each): a session is larger than what a small pack holds, so the pack shows the
  passage the question asks about (an excerpt). A turn is found when its whole line is
  in the pack. Beside the whole-document baselines stands the field's usual answer to
  long documents: the sessions cut into passages of consecutive turns (``PASSAGE_TOKENS``
  at most) ranked by the same hybrid (``passages``).

For every question, at every budget, the pack's recall (the share of the question's
evidence turns that a segment's handle or a fact of the pack stands for) is recorded
beside the baselines' recall, each given the room the issue's rule gives it. The token
counts are the API's own: a handle's ``estimated_tokens``, a fact's ``tokens``.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import connection
from django.test import Client

from contextops.tenancy import api_key_create

from .baselines import Baselines, Embedder, Item, recall
from .locomo import Conversation, Observation, Turn
from .summary import CEILING, MODES, PASSAGES, WHOLE, Outcome

FRAME_BUDGET = 10_000_000
# A pack item's forms that do not show its whole text: its summary, an excerpt, or a cut
# to fit.
SHORTENED_FORMS = frozenset({"summary", "excerpt", "truncated"})
PASSAGE_TOKENS = 128


class ApiFailed(Exception):
    """The API refused a call the benchmark needs: the measurement cannot go on."""


class Api:
    """The JSON API as an agent sees it: the bearer key on every call, JSON both ways."""

    def __init__(self, key: str) -> None:
        self.client = Client()
        self.auth = f"Bearer {key}"

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = self.client.post(
            "/api/v1" + path,
            data=json.dumps(body),
            content_type="application/json",
            HTTP_AUTHORIZATION=self.auth,
        )
        if response.status_code not in (200, 201):
            raise ApiFailed(
                f"POST {path} answered {response.status_code}: {response.content[:400]!r}"
            )
        return response.json()


@dataclass
class Loaded:
    """A conversation as the API holds it: where to ask for packs, and the items (in the
    order written) with the turns each stands for."""

    mode: str
    api: Api
    session_id: str
    frame_id: str
    items: list[Item] = field(default_factory=list)
    by_id: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # A document handle's lines, each with the turn it is (``documents``).
    lines: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    def add(self, item: Item, *aliases: str) -> None:
        self.items.append(item)
        for name in (item.id, *aliases):
            self.by_id[name] = item.dia_ids

    def found(self, pack: dict[str, Any], *, whole: bool = False) -> set[str]:
        """The turns the pack's segments and facts stand for; with ``whole``, only those
        shown with all their text (not cut to fit, not replaced by a summary)."""
        items = [(s["handle_id"], s.get("form")) for s in pack.get("segments") or []]
        items += [(str(f.get("id")), f.get("form")) for f in pack.get("facts") or []]
        items += [(str(f.get("key")), f.get("form")) for f in pack.get("facts") or []]
        found = {
            dia_id
            for name, form in items
            if not (whole and form in SHORTENED_FORMS)
            and not (name in self.lines and form != "full")
            for dia_id in self.by_id.get(name, ())
        }
        if not whole:  # a document shown in part: the turns whose whole line it shows
            for segment in pack.get("segments") or []:
                lines = self.lines.get(segment["handle_id"], [])
                if segment.get("form") != "full":
                    content = segment.get("content") or ""
                    found |= {dia_id for dia_id, line in lines if line in content}
        return found


def _write_order(conversation: Conversation, mode: str) -> list[Turn | Observation]:
    turns = list(conversation.turns) if mode in ("handles", "both") else []
    observations = list(conversation.observations) if mode in ("facts", "both") else []
    # Session by session: a session's turns, then what was observed in it.
    pieces: list[tuple[int, int, int, Turn | Observation]] = [
        (t.session, 0, i, t) for i, t in enumerate(turns)
    ] + [(o.session, 1, i, o) for i, o in enumerate(observations)]
    return [piece for *_, piece in sorted(pieces, key=lambda p: p[:3])]


def load_conversation(conversation: Conversation, mode: str) -> Loaded:
    """A new organization, agent key, session and frame, then the conversation's turns
    and/or observations written through the API."""
    _, raw = api_key_create(
        org_name=f"LoCoMo {conversation.sample_id} {mode}",
        agent_name="recall-benchmark",
        authority="employee",
    )
    api = Api(raw)
    session = api.post(
        "/sessions",
        {
            "title": f"LoCoMo {conversation.sample_id} ({mode})",
            "identity": {"user_name": "recall benchmark", "authority": "employee"},
            "environment": {"timezone": "UTC"},
        },
    )
    frame = api.post(
        f"/sessions/{session['id']}/frames",
        {"goal": "Answer questions about the conversation", "budget": {"total": FRAME_BUDGET}},
    )
    loaded = Loaded(mode, api, str(session["id"]), str(frame["id"]))
    if mode == "documents":
        for lines in _sessions(conversation):
            handle = api.post(
                f"/frames/{loaded.frame_id}/handles",
                {"kind": "document", "content": "\n".join(line for _, line in lines)},
            )
            handle_id = str(handle["id"])
            loaded.lines[handle_id] = lines
            text = "\n".join(line for _, line in lines)
            tokens = int(handle["estimated_tokens"])
            loaded.add(Item(handle_id, text, tokens, tuple(dia_id for dia_id, _ in lines)))
        return loaded
    observed = 0
    for piece in _write_order(conversation, mode):
        if isinstance(piece, Turn):
            handle = api.post(
                f"/frames/{loaded.frame_id}/handles", {"kind": "message", "content": piece.content}
            )
            loaded.add(
                Item(
                    str(handle["id"]),
                    piece.content,
                    int(handle["estimated_tokens"]),
                    (piece.dia_id,),
                )
            )
        else:
            observed += 1
            key = f"obs-{observed}"
            # The subject is left to default to the key: with the speaker as subject each
            # observation would supersede that speaker's previous one (seed 001 rule 2).
            fact = api.post("/facts", {"key": key, "value": piece.text, "source": "observation"})
            if fact.get("outcome", "created") != "created" or fact.get("key") != key:
                raise ApiFailed(f"the fact {key} was not stored as written: {fact.get('outcome')}")
            loaded.add(
                Item(str(fact["id"]), f"{key}: {piece.text}", int(fact["tokens"]), piece.dia_ids),
                key,
            )
    return loaded


def _sessions(conversation: Conversation) -> list[list[tuple[str, str]]]:
    """The conversation's sessions in order, each its turns' (id, line)."""
    by_session: dict[int, list[tuple[str, str]]] = {}
    for turn in conversation.turns:
        by_session.setdefault(turn.session, []).append((turn.dia_id, turn.content))
    return [by_session[number] for number in sorted(by_session)]


def passages(loaded: Loaded) -> list[Item]:
    """The documents cut into passages of consecutive whole turns, each at most
    ``PASSAGE_TOKENS`` (counted as a share of its document's tokens by characters; a
    longer turn is a passage alone)."""
    cut: list[Item] = []
    for item in loaded.items:
        per_char = item.tokens / max(1, len(item.text))
        runs: list[list[tuple[str, str]]] = []
        for dia_id, line in loaded.lines[item.id]:
            size = sum(len(text) + 1 for _, text in runs[-1]) + len(line) if runs else 0
            if not runs or size * per_char > PASSAGE_TOKENS:
                runs.append([])
            runs[-1].append((dia_id, line))
        for run in runs:
            text = "\n".join(line for _, line in run)
            tokens = max(1, round(len(text) * per_char))
            cut.append(Item(f"{item.id}:{len(cut)}", text, tokens, tuple(d for d, _ in run)))
    return cut


def settle_statistics() -> None:
    """On PostgreSQL, what autovacuum does within a minute of a load: the planner's and the
    fact ranking's word statistics (a word in half the facts or more is a stop word) see
    the tables as loaded, so a run does not depend on when autovacuum last woke."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")


def baseline_room(mode: str, budget: int, breakdown: dict[str, int]) -> int:
    """The tokens a baseline may fill for the pack with ``breakdown`` (the issue's rule):
    with facts alone, exactly what the pack spent on facts; otherwise the budget less
    what the pack spent on the brief and the breadcrumbs."""
    if mode == "facts":
        return int(breakdown.get("facts", 0))
    return budget - int(breakdown.get("brief_context", 0)) - int(breakdown.get("breadcrumbs", 0))


def measure(
    conversation: Conversation,
    loaded: Loaded,
    baselines: Baselines,
    budgets: Sequence[int],
    cut: Baselines | None = None,
) -> list[Outcome]:
    """A pack per question and budget, and the baselines in the rooms those packs leave
    (with ``cut``, the documents' passages ranked by the hybrid too: ``passages``)."""
    outcomes = []
    loaded_turns = {dia_id for item in loaded.items for dia_id in item.dia_ids}
    for question in conversation.questions:
        packs = [
            loaded.api.post(
                f"/sessions/{loaded.session_id}/context-pack",
                {"frame_id": loaded.frame_id, "budget_tokens": budget, "query": question.text},
            )
            for budget in budgets
        ]
        summaries = [pack["token_summary"] for pack in packs]
        rooms = [
            baseline_room(loaded.mode, budget, summary.get("breakdown") or {})
            for budget, summary in zip(budgets, summaries, strict=True)
        ]
        others = baselines.recalls(question.text, question.evidence, rooms)
        if cut is not None:
            for other, by_passage in zip(
                others, cut.recalls(question.text, question.evidence, rooms), strict=True
            ):
                other[PASSAGES] = by_passage["hybrid"]
        for budget, pack, summary, room, other in zip(
            budgets, packs, summaries, rooms, others, strict=True
        ):
            outcomes.append(
                Outcome(
                    sample_id=conversation.sample_id,
                    question=question.index,
                    category=question.category,
                    mode=loaded.mode,
                    budget=budget,
                    used=int(summary["used"]),
                    room=room,
                    recall={
                        "pack": recall(question.evidence, loaded.found(pack)),
                        WHOLE: recall(question.evidence, loaded.found(pack, whole=True)),
                        **other,
                        CEILING: recall(question.evidence, loaded_turns),
                    },
                )
            )
    return outcomes


def run(
    conversations: Sequence[Conversation],
    *,
    budgets: Sequence[int],
    modes: Sequence[str] = MODES,
    embed: Embedder,
    say: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
) -> list[Outcome]:
    """Every conversation loaded every way of ``modes`` and measured at every budget."""
    outcomes: list[Outcome] = []
    for conversation in conversations:
        for mode in modes:
            started = time.perf_counter()
            loaded = load_conversation(conversation, mode)
            settle_statistics()
            loading = time.perf_counter() - started
            baselines = Baselines(loaded.items, embed)
            cut = Baselines(passages(loaded), embed) if mode == "documents" else None
            found = measure(conversation, loaded, baselines, budgets, cut)
            outcomes += found
            say(
                f"{conversation.sample_id} {mode}: {len(loaded.items)} items loaded in "
                f"{loading:.1f} s, {len(found)} packs in {time.perf_counter() - started - loading:.1f} s"
            )
    return outcomes
