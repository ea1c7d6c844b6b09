"""A LangGraph graph on contextops: the saver keeps its thread, the store its notes, and
one step waits for a person's approval in the inbox.

    CONTEXTOPS_URL=http://127.0.0.1:8000 CONTEXTOPS_API_KEY=... python examples/langgraph_agent.py

Plain Python nodes, no model: ``draft`` writes a refund proposal and files it in the store,
``approve`` calls LangGraph's ``interrupt()`` (the graph stops; a suspended frame appears
in the approval inbox), and once a person decides, ``ContextopsSaver.interrupt_decision``
turns the decision into the ``Command(resume=...)`` the graph continues with: ``issue``
records the refund, or ``decline`` the refusal with the person's note.

Output: the first line is the thread id, then what happens (including the inbox address),
the last line the thread's dashboard address. ``--approval-timeout`` seconds (120 by
default) to wait for the decision; when nobody decides in time it exits with status 2
and the thread stays interrupted (run it again with the same ``--thread`` to resume).
"""

from __future__ import annotations

import argparse
import operator
import os
import sys
import uuid
from pathlib import Path
from typing import Annotated, Any, TypedDict

try:
    from contextops_client.langgraph import ContextopsSaver, ContextopsStore
except ImportError:  # run from a checkout without the package installed
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "clients" / "python"))
    from contextops_client.langgraph import ContextopsSaver, ContextopsStore

from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore
from langgraph.types import interrupt


class Refund(TypedDict, total=False):
    order: str
    amount: int
    proposal: str
    decision: dict[str, Any]
    log: Annotated[list[str], operator.add]


def say(*parts: object) -> None:
    print(*parts, flush=True)


def draft(state: Refund, *, store: BaseStore) -> dict:
    proposal = f"Refund ${state['amount']} on order {state['order']} (damaged in transit)"
    store.put(("refunds", state["order"]), "proposal", {"text": proposal, "status": "proposed"})
    return {"proposal": proposal, "log": ["drafted"]}


def approve(state: Refund) -> dict:
    decision = interrupt(f"Approve: {state['proposal']}?")
    return {"decision": decision, "log": ["decided"]}


def issue(state: Refund, *, store: BaseStore) -> dict:
    store.put(
        ("refunds", state["order"]),
        "proposal",
        {"text": state["proposal"], "status": "issued", "by": state["decision"]["decided_by"]},
    )
    return {"log": ["issued"]}


def decline(state: Refund, *, store: BaseStore) -> dict:
    note = state["decision"]["note"]
    store.put(
        ("refunds", state["order"]),
        "proposal",
        {"text": state["proposal"], "status": "declined", "note": note},
    )
    return {"log": [f"declined: {note}"]}


def build(saver: ContextopsSaver, store: ContextopsStore):
    builder = StateGraph(Refund)
    builder.add_node("draft", draft)
    builder.add_node("approve", approve)
    builder.add_node("issue", issue)
    builder.add_node("decline", decline)
    builder.add_edge(START, "draft")
    builder.add_edge("draft", "approve")
    builder.add_conditional_edges(
        "approve", lambda s: "issue" if s["decision"]["approved"] else "decline"
    )
    builder.add_edge("issue", END)
    builder.add_edge("decline", END)
    return builder.compile(checkpointer=saver, store=store)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default=os.environ.get("CONTEXTOPS_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--api-key", default=os.environ.get("CONTEXTOPS_API_KEY", ""))
    parser.add_argument("--thread", default=f"refund-{uuid.uuid4().hex[:8]}")
    parser.add_argument("--order", default="A-1042")
    parser.add_argument("--amount", type=int, default=900)
    parser.add_argument("--approval-timeout", type=float, default=120.0)
    args = parser.parse_args(argv)

    saver = ContextopsSaver(args.url, args.api_key)
    store = ContextopsStore(args.url, args.api_key)
    graph = build(saver, store)
    config: Any = {"configurable": {"thread_id": args.thread}}
    say(args.thread)
    if graph.get_state(config).next:
        say("resuming the interrupted thread")
    else:
        result = graph.invoke({"order": args.order, "amount": args.amount, "log": []}, config)
        asked = result["__interrupt__"][0].value
        say(f"waiting for a person: {asked}")
        say(f"approve or reject it at {args.url.rstrip('/')}/inbox/")
    command = saver.interrupt_decision(config, timeout=args.approval_timeout)
    if command is None:
        say("nobody decided in time; the thread stays interrupted")
        return 2
    verdict = "approved" if command.resume["approved"] else "rejected"
    say(f"{verdict} by {command.resume['decided_by']}: {command.resume['note'] or '(no note)'}")
    final = graph.invoke(command, config)
    say("log: " + ", ".join(final["log"]))
    item = store.get(("refunds", args.order), "proposal")
    say(f"store: {item.value['status'] if item else 'nothing'}")
    thread = saver.client.request("GET", f"/langgraph/threads/{args.thread}")
    say(saver.client.absolute_url(thread["dashboard_url"]))
    saver.close()
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
