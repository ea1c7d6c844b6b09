"""examples/research_agent.py end to end: a real process against the live server and a
real worker, with its own fake model; its run is checked in the database."""

import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest
from django.db import connection

from contextops.tenancy import user_create
from facts.models import Fact
from frames.conversation.models import CompactionRun
from frames.models import Frame, Suspension
from frames.rlm.models import RlmState
from tests.waiting import wait_until

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.xdist_group("live"),
    pytest.mark.slow,
]

ROOT = Path(__file__).resolve().parents[2]


def _start(agent, *extra: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    env.update(CONTEXTOPS_URL=agent.url, CONTEXTOPS_API_KEY=agent.key)
    return subprocess.Popen(
        [sys.executable, str(ROOT / "examples" / "research_agent.py"), *extra],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(process: subprocess.Popen) -> list[str]:
    out, err = process.communicate(timeout=180)
    assert process.returncode == 0, f"stdout:\n{out}\nstderr:\n{err}"
    return out.strip().splitlines()


def _check_run(lines: list[str], agent) -> str:
    session_id = lines[0]
    assert uuid.UUID(session_id)
    assert lines[-1] == f"{agent.url}/sessions/{session_id}/"
    frames = Frame.objects.filter(session_id=session_id)
    assert frames.filter(depth=1).count() == 2
    assert frames.filter(depth=0).count() == 2
    assert frames.filter(goal__startswith="Research", status="completed").exists()
    chain = Fact.objects.filter(organization=agent.organization, key__contains=session_id[:8])
    assert chain.filter(status="superseded").count() == 1
    state = RlmState.objects.get(session_id=session_id)
    assert state.variables.filter(name="Final").exists()
    run = CompactionRun.objects.get(session_id=session_id)
    assert run.status == "completed" and run.items_summarized > 0
    return session_id


def test_it_runs_and_skips_publishing_when_nobody_approves(agent, celery_worker):
    lines = _finish(_start(agent, "--approval-timeout", "1"))
    session_id = _check_run(lines, agent)
    assert any("publishing skipped" in line for line in lines)
    suspension = Suspension.objects.get(session_id=session_id)
    assert suspension.requires_approval and suspension.status == "pending"


def test_it_publishes_once_a_person_approves(agent, celery_worker):
    from frames.suspensions.services import suspension_approve

    approver = user_create(org_name="Acme", username="grace", password="pw-12345678", approver=True)
    process = _start(agent, "--approval-timeout", "60")
    approved = threading.Event()

    def approve_when_asked():  # a person at the inbox, on its own thread (and connection)
        def asked():
            pending = Suspension.objects.filter(
                session__organization=agent.organization, status="pending"
            ).first()
            return pending or process.poll() is not None

        try:
            pending = wait_until(asked, timeout=120, interval=0.2, what="the agent to ask")
            if isinstance(pending, Suspension):
                suspension_approve(suspension=pending, user=approver, note="Looks good.")
                approved.set()
        finally:
            connection.close()

    thread = threading.Thread(target=approve_when_asked)
    thread.start()
    lines = _finish(process)
    thread.join(timeout=10)
    assert approved.is_set()
    session_id = _check_run(lines, agent)
    assert any("report published" in line for line in lines)
    assert Suspension.objects.get(session_id=session_id).status == "resumed"
    assert (
        Frame.objects.get(session_id=session_id, goal__startswith="Publish").status == "completed"
    )
