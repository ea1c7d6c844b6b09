"""examples/langgraph_agent.py end to end: a real LangGraph graph in its own process
interrupts, a person decides in the inbox of a real Chromium, and the graph resumes."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from playwright.sync_api import expect

from contextops.tenancy import api_key_create
from facts.models import Fact
from frames.graphs.models import GraphInterrupt, GraphThread
from frames.models import Frame
from tests.browser.conftest import PASSWORD, login

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]


def _start(url: str, thread: str) -> subprocess.Popen:
    _, key = api_key_create(org_name="Acme", agent_name="refund-graph", authority="employee")
    env = {**os.environ, "CONTEXTOPS_URL": url, "CONTEXTOPS_API_KEY": key}
    return subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "examples" / "langgraph_agent.py"),
            "--thread",
            thread,
            "--approval-timeout",
            "90",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _pending_row(page, live_server):
    login(page, "grace")
    page.get_by_role("link", name="Approvals").click()
    row = page.locator("#pending-suspensions .suspension", has_text="refund-")
    expect(row).to_have_count(1, timeout=60_000)
    expect(row).to_contain_text("Approve: Refund $900 on order A-1042")
    expect(row).to_contain_text("LangGraph approve in thread")
    return row


def _finish(process: subprocess.Popen) -> list[str]:
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, f"stdout:\n{out}\nstderr:\n{err}"
    return out.strip().splitlines()


def test_a_person_approves_the_interrupted_graph_in_the_inbox(page, live_server, make_user):
    make_user(username="grace", approver=True, password=PASSWORD)
    process = _start(live_server.url, "refund-approved")
    row = _pending_row(page, live_server)
    row.get_by_role("button", name="Approve").click()
    expect(row).to_contain_text("Approved.")

    lines = _finish(process)
    assert lines[0] == "refund-approved"
    assert "approved by grace: (no note)" in lines
    assert "log: drafted, decided, issued" in lines
    assert "store: issued" in lines
    thread = GraphThread.objects.get(thread_id="refund-approved")
    assert lines[-1] == f"{live_server.url}/langgraph/{thread.pk}/"
    interrupt = GraphInterrupt.objects.get(thread=thread)
    assert interrupt.node == "approve"
    assert Frame.objects.get(pk=interrupt.frame_id).status == "completed"
    # The store's item is a fact whose lineage holds both versions.
    versions = Fact.objects.filter(subject__startswith="lg:refunds.A-1042:").order_by("created_at")
    assert [v.value["status"] for v in versions] == ["proposed", "issued"]
    assert page.console_errors == []

    page.goto(f"/langgraph/{thread.pk}/")
    expect(page.locator(".graph-history tbody tr").last).to_contain_text("issue")


def test_a_rejection_with_a_note_sends_the_graph_down_the_other_branch(
    page, live_server, make_user
):
    make_user(username="grace", approver=True, password=PASSWORD)
    process = _start(live_server.url, "refund-rejected")
    row = _pending_row(page, live_server)
    row.get_by_label("Why reject? (required)").fill("Customer already got a voucher")
    row.get_by_role("button", name="Reject").click()
    expect(row).to_contain_text("Rejected.")

    lines = _finish(process)
    assert "rejected by grace: Customer already got a voucher" in lines
    assert "log: drafted, decided, declined: Customer already got a voucher" in lines
    assert "store: declined" in lines
    interrupt = GraphInterrupt.objects.get(thread__thread_id="refund-rejected")
    assert Frame.objects.get(pk=interrupt.frame_id).status == "failed"
