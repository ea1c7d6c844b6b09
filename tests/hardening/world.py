"""Every write of the API and of the dashboard with a valid request, and how to send one.

The authorization matrix sends each as an outsider and as Acme's own callers; the commit
tests send each with the database failing right after the commit. Bodies and addresses
name the ``acme`` fixture's ids as ``{frame_id}``.
"""

import json
import re
from dataclasses import dataclass, field

from django.test import Client

from facts.models import Fact, FactConflict
from frames.conversation.models import CompactionRun
from frames.models import ContextHandle, Session, Suspension, token_hash
from frames.rlm.models import RlmVariable
from frames.services.handles import handle_add

NO_ID = "00000000-0000-0000-0000-000000000000"


@dataclass(frozen=True)
class Write:
    """A valid request for one write operation and what Acme's own callers get for it.

    ``body`` strings may name fixture ids as ``{frame_id}``; ``ids`` overrides the path
    ids (a draft fact for promote/discard). ``own`` is the status of Acme's agent (an
    employee), ``guest`` of Acme's guest when it differs, ``other`` of another
    organization's admin. ``refusal`` is the error of a 403 Acme's callers get.
    """

    body: dict | None = None
    query: str = ""
    own: int = 200
    guest: int | None = None
    other: int = 404
    ids: dict = field(default_factory=dict)
    refusal: str = "authority_too_low"


# Every operation that writes to an object named in its path. A write missing from here
# and from CREATES fails test_every_write_has_a_valid_request.
WRITES = {
    ("DELETE", "/rlm/states/{state_id}/variables/{name}"): Write(),
    ("DELETE", "/sessions/{session_id}/working-set/{key}"): Write(own=204),
    ("POST", "/compactions/{compaction_id}/revert"): Write(own=409),  # still queued
    ("DELETE", "/langgraph/threads/{thread_id}"): Write(own=204),
    ("POST", "/langgraph/threads/{thread_id}/copy"): Write(
        {"target_thread_id": "intruder-copy"}, own=201
    ),
    ("POST", "/facts/{key}/discard"): Write(own=200, guest=403, ids={"key": "acme_draft_fact"}),
    ("POST", "/facts/{key}/invalidate"): Write(own=200, guest=403),
    # No global fact holds the draft's subject, so any authority may promote it (docs/api.md).
    ("POST", "/facts/{key}/promote"): Write(own=200, ids={"key": "acme_draft_fact"}),
    ("POST", "/facts/{key}/review"): Write(own=200),
    # The proposal's facts were written by an employee: a guest may not let one replace the other.
    ("POST", "/fact-conflicts/{conflict_id}/accept"): Write(own=200, guest=403),
    ("POST", "/fact-conflicts/{conflict_id}/reject"): Write(own=200),
    ("POST", "/fact-conflicts/{conflict_id}/distinct"): Write(own=200),
    ("POST", "/frames/{frame_id}/handles"): Write(
        {"kind": "document", "content": "intruder content", "priority": "high"}, own=201
    ),
    ("POST", "/frames/{frame_id}/compact"): Write(
        {"target_tokens": 0, "strategy": "priority_based"}
    ),
    ("POST", "/frames/{frame_id}/pop"): Write({"status": "completed", "result_refs": ["x"]}),
    ("POST", "/frames/{frame_id}/reserve"): Write({"purpose": "intruder", "amount": 10}),
    ("POST", "/frames/{frame_id}/results"): Write({"result_refs": ["intruder result"]}),
    ("POST", "/frames/{frame_id}/suspend"): Write(
        {"reason": "intruder", "requires_approval": True, "expires_in_seconds": 60}, own=201
    ),
    ("POST", "/frames/{frame_id}/usage"): Write(
        {"input_tokens": 5, "output_tokens": 7, "model": "intruder-model"}
    ),
    ("POST", "/handles/{handle_id}/annotations"): Write({"note": "intruder note"}, own=201),
    ("POST", "/handles/{handle_id}/attention"): Write({"weight": 2.0}),
    ("POST", "/handles/{handle_id}/page-in"): Write(query="?mode=full", own=409),  # loaded
    ("POST", "/handles/{handle_id}/page-out"): Write(own=202),
    ("POST", "/handles/{handle_id}/state"): Write({"to": "hot"}),
    ("POST", "/rlm/states/{state_id}/checkpoints"): Write({"name": "intruder"}, own=201),
    ("POST", "/rlm/states/{state_id}/rollback"): Write({"checkpoint_id": "{checkpoint_id}"}),
    ("POST", "/sessions/{session_id}/compactions"): Write(
        {"strategy": "summarize_oldest"},
        own=409,  # one is queued already
    ),
    ("POST", "/sessions/{session_id}/context-pack"): Write(
        {"budget_tokens": 2000, "frame_id": "{frame_id}", "include_handles": ["{handle_id}"]}
    ),
    ("PATCH", "/sessions/{session_id}"): Write({"eviction_policy": "size_first"}),
    # Deleting a session and everything that belongs only to it (docs/api.md).
    ("DELETE", "/sessions/{session_id}"): Write(),
    ("POST", "/sessions/{session_id}/end"): Write(),
    ("POST", "/sessions/{session_id}/persist"): Write(),
    ("POST", "/sessions/{session_id}/frames"): Write(
        {"goal": "intruder goal", "parent_frame_id": "{frame_id}", "budget": {"total": 100}},
        own=201,
    ),
    ("POST", "/sessions/{session_id}/messages"): Write(
        {
            "messages": [
                {"role": "user", "content": "intruder asks"},
                {"role": "assistant", "content": [{"type": "text", "text": "intruder answers"}]},
            ],
            "usage": {"input_tokens": 3, "output_tokens": 4},
        }
    ),
    ("POST", "/suspensions/{token}/resume"): Write(own=409),  # waits for an approver
    # Deciding takes a person's own key; an agent's key is refused (permission_denied).
    ("POST", "/suspensions/{token}/approve"): Write(
        {"note": "intruder"}, own=403, refusal="permission_denied"
    ),
    ("POST", "/suspensions/{token}/reject"): Write(
        {"note": "intruder"}, own=403, refusal="permission_denied"
    ),
    # Notifications are managed by administrators (an admin agent or an admin's own key).
    ("DELETE", "/notifications/destinations/{destination_id}"): Write(
        own=403, refusal="authority_too_low"
    ),
    ("POST", "/notifications/destinations/{destination_id}/test"): Write(
        own=403, refusal="authority_too_low"
    ),
    ("PUT", "/rlm/states/{state_id}/variables/{name}"): Write(
        {"value": "intruder value", "description": "intruder"}
    ),
    ("PUT", "/sessions/{session_id}/environment"): Write(
        {"timezone": "Europe/Paris", "location": "intruder"}
    ),
    ("PUT", "/sessions/{session_id}/identity"): Write({"user_name": "Mallory"}, own=409),
    ("PUT", "/sessions/{session_id}/working-set/{key}"): Write(
        {"value": "intruder value", "ttl_seconds": 60}
    ),
}

# A document as GET /rlm/states/{id}/export writes it, naming Acme's state.
RLM_DOCUMENT = {
    "version": "1.0.0",
    "state_id": "{state_id}",
    "variables": {"prompt": {"name": "prompt", "value": "imported prompt", "type": "text"}},
    "history": {"mutations": [], "checkpoints": []},
    "metadata": {},
}
# The writes that create: valid bodies naming Acme's values; another organization gets
# its own object (``other``), Acme's stay as they were.
# A Claude Code transcript of one line, as an agent's upload carries it.
INTRUDER_TRANSCRIPT = (
    '{"type":"user","sessionId":"intruder-session","timestamp":"2026-01-02T03:04:05Z",'
    '"message":{"role":"user","content":"intruder asks"}}\n'
)
# A LangGraph value as the saver sends it: a serializer type and base64 bytes ("intruder").
GRAPH_BLOB = {"type": "json", "data": "ImludHJ1ZGVyIg=="}
CREATES = {
    ("POST", "/langgraph/checkpoints"): Write(
        {
            "thread_id": "{thread_id}",
            "checkpoint_id": "intruder-checkpoint",
            "checkpoint": GRAPH_BLOB,
            "channel_versions": {"messages": 9},
            "blobs": [{"channel": "messages", "version": "9", **GRAPH_BLOB}],
            "metadata": {"source": "intruder", "step": 9},
        },
        own=201,
        other=201,  # a thread of the same name in its own organization
    ),
    ("POST", "/langgraph/writes"): Write(
        {
            "thread_id": "{thread_id}",
            "checkpoint_id": "{graph_checkpoint_id}",
            "task_id": "intruder-task",
            "writes": [{"idx": 0, "channel": "messages", **GRAPH_BLOB}],
        },
        other=200,  # a thread of the same name in its own organization
    ),
    ("POST", "/langgraph/threads/prune"): Write(
        {"thread_ids": ["{thread_id}"], "strategy": "delete"}, other=200
    ),
    ("POST", "/langgraph/runs/delete"): Write({"run_ids": ["acme-secret-run"]}, other=200),
    ("POST", "/imports"): Write(
        {"file_name": "intruder.jsonl", "content": INTRUDER_TRANSCRIPT}, own=202, other=202
    ),
    ("POST", "/constraints/check"): Write(
        {"subject": "acme-secret-budget", "value": 1000}, own=200, other=200
    ),
    ("POST", "/facts"): Write(
        {"key": "acme_secret_fact", "value": "another value", "source": "user"},
        own=409,  # key_exists: the key is taken, with another value
        other=201,
    ),
    ("POST", "/rlm/states"): Write({"prompt": "intruder prompt"}, own=201, other=201),
    ("POST", "/rlm/states/import"): Write(RLM_DOCUMENT, own=409, other=201),  # state_exists
    ("POST", "/sessions"): Write({"title": "acme-secret-title"}, own=201, other=201),
    ("POST", "/notifications/destinations"): Write(
        {"name": "acme-secret-destination", "kind": "email"},
        own=403,
        other=201,
        refusal="authority_too_low",
    ),
}
REQUESTS = {**WRITES, **CREATES}


def fill(value, ids: dict):
    """``value`` with every ``{name}`` string replaced by the fixture's id of that name."""
    if isinstance(value, str):
        return re.sub(r"\{(\w+)\}", lambda m: ids.get(m.group(1), NO_ID), value)
    if isinstance(value, dict):
        return {k: fill(v, ids) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, ids) for v in value]
    return value


def address(template: str, ids: dict) -> str:
    return fill(template, ids)


def call(client: Client, method: str, path: str, key: str | None, body: dict | None = None):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"} if key else {}
    url = "/api/v1" + path
    if method in {"POST", "PUT", "PATCH"}:
        return getattr(client, method.lower())(
            url, data=json.dumps(body or {}), content_type="application/json", **headers
        )
    return getattr(client, method.lower())(url, **headers)


def request_for(method: str, path: str, ids: dict) -> tuple[str, dict | None]:
    """The address and the valid body of ``method path`` against ``ids``."""
    write = REQUESTS.get((method, path), Write())
    ids = {**ids, **write.ids}
    return address(path, ids) + write.query, fill(write.body, ids)


@dataclass(frozen=True)
class Action:
    """A dashboard POST: its address, form, the permission it needs, and how to see it done."""

    url: str
    data: dict
    needs: str  # "" (any member), "approver" or "admin"
    done: object  # callable(acme, jobs_sent) -> bool
    goes_to: str  # where a plain form post is redirected after it


def _suspension(acme) -> Suspension:
    return Suspension.objects.get(token=acme["ids"]["token"])


ACTIONS = {
    "inbox approve": Action(
        "/inbox/{waiting_frame_id}/{hashed}/approve/",
        {"note": "fine"},
        "approver",
        lambda acme, jobs: _suspension(acme).status == "approved",
        "/inbox/",
    ),
    "inbox reject": Action(
        "/inbox/{waiting_frame_id}/{hashed}/reject/",
        {"note": "not now"},
        "approver",
        lambda acme, jobs: _suspension(acme).status == "rejected",
        "/inbox/",
    ),
    "fact review": Action(
        "/facts/{key}/review/",
        {},
        "",
        lambda acme, jobs: not Fact.objects.get(key="acme_secret_fact").needs_review,
        "/facts/{key}/lineage/",
    ),
    "fact conflict reject": Action(
        "/facts/conflicts/{conflict_id}/reject/",
        {},
        "approver",
        lambda acme, jobs: (
            FactConflict.objects.get(pk=acme["ids"]["conflict_id"]).status == "rejected"
        ),
        "/facts/conflicts/",
    ),
    "RLM rollback": Action(
        "/rlm/{state_id}/rollback/",
        {"checkpoint_id": "{checkpoint_id}"},
        "admin",
        lambda acme, jobs: not RlmVariable.objects.filter(name="acme_var").exists(),
        "/rlm/{state_id}/",
    ),
    "handle page-in": Action(
        "/handles/{cold_handle_id}/page-in/",
        {"mode": "full"},
        "",
        lambda acme, jobs: (
            ContextHandle.objects.get(pk=acme["ids"]["cold_handle_id"]).state == "loaded"
        ),
        "/frames/{frame_id}/handles/",
    ),
    "handle page-out": Action(
        "/handles/{handle_id}/page-out/",
        {},
        "",
        lambda acme, jobs: [name for name, _ in jobs] == ["frames.handle_page_out"],
        "/frames/{frame_id}/handles/",
    ),
    "session delete": Action(
        "/sessions/{session_id}/delete/",
        {"confirm": "on"},
        "admin",
        lambda acme, jobs: not Session.objects.filter(pk=acme["ids"]["session_id"]).exists(),
        "/?deleted={session_id}",  # the list, saying what went
    ),
    "compaction start": Action(
        "/sessions/{session_id}/turns/compactions/start/",
        {"strategy": "summarize_oldest"},
        "",
        lambda acme, jobs: CompactionRun.objects.filter(strategy="summarize_oldest").exists(),
        "/sessions/{session_id}/turns/",
    ),
}


def actions_ready(acme) -> dict:
    """Make every dashboard action possible on Acme's world; the ids the actions name."""
    ids = dict(acme["ids"])
    ids["hashed"] = token_hash(ids["token"])
    cold = handle_add(frame=acme["frame"], kind="document", content="acme-secret-cold")
    ContextHandle.objects.filter(pk=cold.pk).update(state="cold")
    ids["cold_handle_id"] = acme["ids"]["cold_handle_id"] = str(cold.pk)
    Fact.objects.filter(key="acme_secret_fact").update(needs_review=True)
    CompactionRun.objects.filter(pk=ids["compaction_id"]).update(status="failed")
    return ids
