"""A write that committed says so, even when the database fails right after the commit.

The API's writes and the dashboard's actions alike.

Each request runs with the database "going away" the moment its change commits: any
query after that raises OperationalError, as it would during a restart. A write that
read its answer after the commit would then report 503 "nothing was changed" for a
change that was stored, and an agent that retries would apply it twice (two usages
charged for one model call). So every write reads what it answers with inside its
transaction, and the answer is the documented one with nothing queried after the commit.
"""

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from django.db import DEFAULT_DB_ALIAS, OperationalError, connection, connections
from django.test import Client

from contextops.llm import ExtractiveSummarizer
from facts.models import Fact
from frames.context.paging import handle_page_out_complete
from frames.conversation.compaction import compaction_execute
from frames.suspensions.selectors import suspension_get
from frames.suspensions.services import suspension_approve
from tests.hardening.conftest import acme_committed_fixtures
from tests.hardening.world import (
    ACTIONS,
    REQUESTS,
    RLM_DOCUMENT,
    actions_ready,
    call,
    fill,
    request_for,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("jobs_sent")]


# Acme's world is built and committed once for the module (``acme_committed`` in
# conftest.py) and every table is put back to it before each test, instead of the world
# built through the API for each test and every table flushed after it.
_django_db_helper, api, acme = acme_committed_fixtures()


def _changes_rows(sql: str, cursor) -> bool:
    # An INSERT's row count is unknown until its RETURNING rows are read (SQLite).
    statement = sql.lstrip().upper()
    if statement.startswith("INSERT"):
        return True
    if statement.startswith("WITH"):  # PostgreSQL's one-statement writes: WITH ... (UPDATE ...)
        return any(f"{verb} " in statement for verb in ("INSERT", "UPDATE", "DELETE"))
    return statement.startswith(("UPDATE", "DELETE")) and cursor.rowcount > 0


class DatabaseGoneAfterCommit:
    """An execute wrapper: the database answers until a change commits, then never again.

    A change commits when a transaction that changed rows commits, or when a statement
    that changed rows runs outside any transaction (autocommit). A transaction that only
    read commits nothing a failure could hide.
    """

    def __init__(self):
        self.commits = 0
        self.changed = False
        self.after_commit: list[str] = []

    def committed(self) -> None:
        if self.changed:
            self.commits += 1
        self.changed = False

    def __call__(self, execute, sql, params, many, context):
        if self.commits:
            self.after_commit.append(sql[:200])
            raise OperationalError("server closed the connection unexpectedly")
        result = execute(sql, params, many, context)
        if _changes_rows(sql, context["cursor"]):
            self.changed = True
            if not connection.in_atomic_block:
                self.committed()
        return result


def gone_after_commit(method: str, path: str, key: str, body: dict | None):
    """Send one API request with the database failing after its first commit."""
    return _sent_with_database_gone(lambda: call(Client(), method, path, key, body))


def _sent_with_database_gone(send):
    guard = DatabaseGoneAfterCommit()
    wrapper = connections[DEFAULT_DB_ALIAS]
    commit = wrapper.commit

    def commit_then_go():
        commit()
        guard.committed()

    wrapper.commit = commit_then_go  # Atomic commits through the wrapper's own method
    try:
        with wrapper.execute_wrapper(guard):
            response = send()
    finally:
        del wrapper.commit
    return response, guard


STORES_NOTHING = {
    ("POST", "/constraints/check"),  # a check only reads
    ("POST", "/facts/{key}/review"),  # Acme's fact is not flagged: SUCCESSES clears a flag
    ("POST", "/handles/{handle_id}/page-out"),  # queues a job; the worker writes
}


@pytest.mark.parametrize(
    "method,path", sorted(REQUESTS), ids=[f"{m} {p}" for m, p in sorted(REQUESTS)]
)
def test_every_write_answers_from_inside_its_transaction(method, path, api, acme):
    target, body = request_for(method, path, acme["ids"])
    response, guard = gone_after_commit(method, target, api.key, body)
    expected = REQUESTS[method, path].own
    assert guard.after_commit == [], "queried after the commit"
    assert response.status_code == expected, response.content
    if expected < 300 and (method, path) not in STORES_NOTHING:
        assert guard.commits >= 1, "the write committed nothing"


@dataclass(frozen=True)
class Success:
    """A request the catalogue sends into a conflict, made to succeed: ``setup`` gets the
    world ready and returns ids to add; ``body`` names them as ``{name}``."""

    method: str
    path: str
    status: int
    body: dict | None = None
    setup: Callable | None = None


def _conversation(api, acme, turns: int = 6) -> None:
    for n in range(turns):
        api.post(
            f"/sessions/{acme['ids']['session_id']}/messages",
            {
                "messages": [
                    {"role": "user", "content": f"Question {n} about the quarterly figures."},
                    {"role": "assistant", "content": f"Answer {n}: the figures hold."},
                ]
            },
        )


def _compacted(api, acme, make_user) -> dict:
    _conversation(api, acme)
    compaction_execute(run_id=acme["ids"]["compaction_id"], summarizer=ExtractiveSummarizer())
    return {}


def _paged_out(api, acme, make_user) -> dict:
    handle_page_out_complete(handle_id=acme["ids"]["handle_id"])
    return {}


def _approved(api, acme, make_user) -> dict:
    suspension = suspension_get(organization=api.organization, token=acme["ids"]["token"])
    suspension_approve(suspension=suspension, user=make_user(username="grace", approver=True))
    return {}


def _flagged(api, acme, make_user) -> dict:
    Fact.objects.filter(key=acme["ids"]["key"]).update(needs_review=True)
    return {}


SUCCESSES = {
    "clear a fact's review flag": Success("POST", "/facts/{key}/review", 200, setup=_flagged),
    "revert a completed compaction": Success(
        "POST", "/compactions/{compaction_id}/revert", 200, setup=_compacted
    ),
    "start a compaction": Success(
        "POST", "/sessions/{session_id}/compactions", 202, {}, setup=_compacted
    ),
    "page a handle back in": Success(
        "POST", "/handles/{handle_id}/page-in?mode=full", 200, setup=_paged_out
    ),
    "resume an approved suspension": Success(
        "POST", "/suspensions/{token}/resume", 200, setup=_approved
    ),
    "write a new fact": Success(
        "POST", "/facts", 201, {"key": "acme_new_fact", "value": "new", "source": "user"}
    ),
    "supersede a fact": Success(
        "POST",
        "/facts",
        201,
        {"key": "acme_fact_v2", "value": "newer", "source": "user", "supersedes": "{key}"},
    ),
    "import an RLM state": Success(
        "POST", "/rlm/states/import", 201, {**RLM_DOCUMENT, "state_id": "state-1a2b3c4d"}
    ),
}


@pytest.mark.parametrize("name", list(SUCCESSES))
def test_writes_that_succeed_answer_from_inside_their_transaction(name, api, acme, make_user):
    case = SUCCESSES[name]
    ids = {**acme["ids"], **(case.setup(api, acme, make_user) if case.setup else {})}
    response, guard = gone_after_commit(
        case.method, fill(case.path, ids), api.key, fill(case.body, ids)
    )
    assert guard.after_commit == [], "queried after the commit"
    assert response.status_code == case.status, response.content
    assert guard.commits >= 1, "the write committed nothing"


def test_a_refused_supersession_keeps_its_proposal_and_says_so(acme, make_api):
    guest = make_api(agent="visitor", authority="guest")
    guest.get("/facts")  # its first call stamps the key's last use, a commit of its own
    body = {
        "key": "acme_guess",
        "value": "lower",
        "source": "user",
        "supersedes": "acme_secret_fact",
    }
    response, guard = gone_after_commit("POST", "/facts", guest.key, body)
    assert guard.after_commit == [], "queried after the commit"
    assert response.status_code == 403, response.content
    assert response.json()["error"] == "authority_too_low"
    assert response.json()["proposal"] == "acme_guess"
    assert guard.commits == 1  # the proposal, kept as the answer says


@pytest.mark.parametrize("htmx", [False, True], ids=["form", "htmx"])
@pytest.mark.parametrize("action", list(ACTIONS))
def test_every_dashboard_action_answers_from_inside_its_transaction(
    action, htmx, acme, make_user, jobs_sent
):
    ids = actions_ready(acme)
    spec = ACTIONS[action]
    client = Client()
    client.force_login(make_user(username="root", approver=True, admin=True))
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    response, guard = _sent_with_database_gone(
        lambda: client.post(fill(spec.url, ids), fill(spec.data, ids), **headers)
    )
    assert guard.after_commit == [], "queried after the commit"
    assert response.status_code == (200 if htmx else 302), response.content[:500]
    if action != "handle page-out":  # it queues a job; the worker writes
        assert guard.commits == 1
    assert spec.done(acme, jobs_sent), "the action did not happen"


def test_the_dashboard_answers_a_lost_database_with_a_503_page(acme, member_client):
    def database_gone(execute, sql, params, many, context):
        raise OperationalError("server closed the connection unexpectedly")

    with connection.execute_wrapper(database_gone):
        response = member_client.get(f"/sessions/{acme['ids']['session_id']}/")
    assert response.status_code == 503
    assert response["Retry-After"] == "2"
    assert "The database is unavailable" in response.content.decode()
