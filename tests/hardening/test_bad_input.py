"""Bad input of every kind gets a documented error, changes nothing, and never a 500."""

import json
import unicodedata
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from urllib.parse import quote

import pytest
from django.test import Client
from django.utils.html import escape

from contextops.api import api as ninja_api
from frames.models import ContextHandle, Event, Frame
from frames.projections import budget_audit
from tests.conftest import ApiClient, api_client_create, built_once
from tests.hardening.figures import figures_record
from tests.hardening.snapshots import organization_rows, session_rows

INJECTIONS = [
    "'; DROP TABLE frames_frame; --",
    '" OR 1=1 --',
    "{{ settings.SECRET_KEY }}",
    "{% debug %}",
    "<script>document.title='pwned'</script>",
    "<img src=x onerror=alert(1)>",
    "../../etc/passwd",
    "\u202etxt.exe",
    "😀" * 50,
]


@pytest.fixture
def session(api):
    response = api.post("/sessions", {"identity": {"user_name": "Ada"}})
    return response.json()


def _raw(api, path, data: bytes, **extra):
    return api.client.post(
        "/api/v1" + path,
        data=data,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {api.key}",
        **extra,
    )


def test_an_oversized_body_is_refused_from_its_length_before_it_is_read(api, session, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = _raw(api, f"/sessions/{session['id']}/frames", b"x" * 2000)
    assert response.status_code == 413
    assert response.json() == {
        "error": "too_large",
        "detail": "The body is 2000 bytes; the limit is 1000.",
        "limit": 1000,
    }


def test_a_body_of_exactly_the_limit_is_read_and_one_byte_more_is_refused(api, session, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    path = f"/sessions/{session['id']}/frames"

    def body(size: int) -> bytes:
        shell = b'{"goal": "", "budget": {"total": 10}}'
        return shell.replace(b'""', b'"' + b"g" * (size - len(shell)) + b'"')

    assert len(body(1000)) == 1000
    assert _raw(api, path, body(1000)).status_code == 201
    refused = _raw(api, path, body(1001))
    assert refused.status_code == 413 and refused.json()["limit"] == 1000


def test_deeply_nested_json_is_refused(api, session):
    deep = "[" * 5000 + "]" * 5000
    body = f'{{"goal": "deep", "budget": {{"total": 10}}, "inputs": {{"x": {deep}}}}}'.encode()
    response = _raw(api, f"/sessions/{session['id']}/frames", body)
    assert response.status_code == 422
    assert response.json()["error"] == "validation_error"
    assert response.json()["errors"] == [
        {"loc": ["body"], "msg": "The body nests too deeply to be read."}
    ]
    assert not Frame.objects.filter(goal="deep").exists()


@pytest.mark.parametrize(
    "data",
    [b"\xff\xfe\xfd", b'{"goal": "\xc3\x28", "budget": {"total": 1}}', b"{", b"null", b'"text"'],
)
def test_bodies_that_are_not_a_json_object_are_refused(api, session, data):
    response = _raw(api, f"/sessions/{session['id']}/frames", data)
    assert response.status_code == 422, response.content
    assert response.json()["error"] == "validation_error"


@pytest.mark.parametrize(
    "budget",
    [
        {"total": -5},
        {"total": 10**30},
        {"total": 1.5},
        {"total": None},
        {"total": 10, "max_subframe_depth": -1},
    ],
)
def test_impossible_budgets_are_field_errors(api, session, budget):
    response = api.post(f"/sessions/{session['id']}/frames", {"goal": "g", "budget": budget})
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"][:2] == ["body", "budget"]


def test_unknown_enum_values_are_field_errors(api, session):
    frame = api.post(
        f"/sessions/{session['id']}/frames", {"goal": "g", "budget": {"total": 100}}
    ).json()
    for path, body in (
        (f"/frames/{frame['id']}/handles", {"kind": "telepathy", "content": "x"}),
        (f"/frames/{frame['id']}/pop", {"status": "exploded"}),
        ("/sessions", {"eviction_policy": "random"}),
    ):
        response = api.post(path, body)
        assert response.status_code == 422, path
        assert response.json()["error"] == "validation_error"


def test_nul_characters_anywhere_in_the_address_are_refused(api, member_client):
    assert api.get("/sessions/%00").status_code == 422
    assert api.get("/sessions", {"search": "a\x00b"}).status_code == 422
    assert member_client.get("/", {"q": "\x00"}).status_code == 400


@pytest.mark.parametrize("text", INJECTIONS)
def test_injection_strings_are_stored_verbatim_and_rendered_inert(
    api, session, member_client, text, settings
):
    frame = api.post(
        f"/sessions/{session['id']}/frames",
        {"goal": text, "budget": {"total": 100}, "inputs": {"note": text}},
    )
    assert frame.status_code == 201
    assert api.get(f"/frames/{frame.json()['id']}").json()["goal"] == text
    assert Frame.objects.count() == 1  # the DROP TABLE did nothing
    page = member_client.get(f"/frames/{frame.json()['id']}/").content.decode()
    assert "<script>document.title" not in page and "<img src=x" not in page
    assert settings.SECRET_KEY not in page
    if text.startswith("{"):
        assert text in page  # shown as typed, never evaluated


def test_a_failed_write_leaves_no_event_behind(api, session):
    before = Event.objects.count()
    api.post(f"/sessions/{session['id']}/frames", {"goal": "g", "budget": {"total": -1}})
    api.post(
        f"/sessions/{session['id']}/frames",
        {
            "goal": "g",
            "parent_frame_id": "00000000-0000-0000-0000-000000000000",
            "budget": {"total": 1},
        },
    )
    assert Event.objects.count() == before


def test_errors_on_unknown_api_paths_and_methods_are_json(api):
    missing = api.get("/no/such/path")
    assert missing.status_code == 404 and missing.json()["error"] == "not_found"
    wrong = api.client.delete("/api/v1/sessions", HTTP_AUTHORIZATION=f"Bearer {api.key}")
    assert wrong.status_code == 405 and json.loads(wrong.content)["error"]


def test_the_dashboard_never_answers_html_errors_with_a_stack_trace(member_client):
    assert member_client.get("/sessions/not-a-uuid/").status_code == 404
    assert Client().get("/frames/00000000-0000-0000-0000-000000000000/").status_code == 302


@pytest.mark.parametrize(
    "path",
    [
        "/sessions?offset=",
        "/facts?offset=",
        "/rlm/states?offset=",
        "/sessions/{session}/events?after=",
    ],
)
def test_numbers_too_large_for_any_column_are_refused_not_crashed_on(api, session, path):
    response = api.get(path.replace("{session}", session["id"]) + "3107061920617448092866061533184")
    assert response.status_code == 422, response.content
    assert response.json()["error"] == "validation_error"


# -- Injection strings in every text field an agent writes -----------------------------


def _place_build(api: ApiClient, other: ApiClient) -> dict[str, str]:
    """A session, a frame and an RLM state to write into, and bystanders that must not move:
    another session of the same organization and everything of another organization."""
    session = api.post("/sessions", {"identity": {"user_name": "Ada"}}).json()
    frame = api.post(
        f"/sessions/{session['id']}/frames", {"goal": "Work", "budget": {"total": 10**6}}
    ).json()
    state = api.post("/rlm/states", {"prompt": "Solve it", "session_id": session["id"]}).json()
    neighbour = api.post("/sessions", {"title": "neighbour"}).json()
    api.post(f"/sessions/{neighbour['id']}/frames", {"goal": "Other", "budget": {"total": 10}})
    api.put(f"/sessions/{neighbour['id']}/working-set/k", {"value": "kept"})
    theirs = other.post("/sessions", {"title": "theirs"}).json()
    other.post(f"/sessions/{theirs['id']}/frames", {"goal": "Theirs", "budget": {"total": 10}})
    other.post("/facts", {"key": "theirs", "value": "kept", "source": "user"})
    other.post("/rlm/states", {"prompt": "theirs"})
    return {
        "session_id": session["id"],
        "frame_id": frame["id"],
        "state_id": state["state_id"],
        "neighbour_id": neighbour["id"],
    }


@pytest.fixture(scope="module")
def place_once(django_db_setup, django_db_blocker) -> Iterator[dict[str, str]]:
    """The place, built once for the module by the agent ``api`` is a key of (Acme's
    researcher) and Initech's bystander, inside a transaction open for the module and
    rolled back after its last test (as ``acme_once`` in conftest.py builds Acme's world).
    Each test's own transaction is a savepoint inside it, rolled back when the test ends:
    what a test writes into the place is gone before the next one starts, as when the
    place was built for each test."""
    yield from built_once(
        django_db_blocker,
        lambda: _place_build(api_client_create(), api_client_create("Initech", "bystander")),
    )


@pytest.fixture
def place(place_once, api, db) -> dict[str, str]:
    """The module's place; ``api`` is a key of the agent that built it."""
    assert api.agent.name == "researcher" and api.organization.name == "Acme"
    return dict(place_once)


def _q(text: str) -> str:
    return quote(text, safe="")


def _fresh() -> str:
    return f"k_{uuid.uuid4().hex[:8]}"


def _fact(api, **fields):
    return api.post("/facts", {"key": _fresh(), "value": "v", "source": "user", **fields})


def _fact_field(name: str):
    return lambda api, p, r, t: api.get(f"/facts/{_q(r.json()['key'])}").json()[name]


def _handle_document(api, p, t):
    return api.post(f"/frames/{p['frame_id']}/handles", {"kind": "document", "content": t})


def _handle_content(api, p, r, t):
    pack = api.post(
        f"/sessions/{p['session_id']}/context-pack",
        {"budget_tokens": 100_000, "frame_id": p["frame_id"], "include_handles": [r.json()["id"]]},
    ).json()
    return next(s["content"] for s in pack["segments"] if s["handle_id"] == r.json()["id"])


def _session_with(api, **body):
    return api.post("/sessions", body)


def _identity(name: str):
    return lambda api, p, r, t: api.get(f"/sessions/{r.json()['id']}").json()["identity"][name]


def _last_turn(api, p):
    return api.get(f"/sessions/{p['session_id']}/turns").json()[-1]


def _reserved_for(api, p, purpose):
    reservations = api.get(f"/frames/{p['frame_id']}").json()["budget"]["reservations"]
    return purpose if purpose in reservations else sorted(reservations)


def _suspend(api, p, text):
    child = api.post(
        f"/sessions/{p['session_id']}/frames",
        {"goal": "Wait", "parent_frame_id": p["frame_id"], "budget": {"total": 10}},
    ).json()
    return api.post(f"/frames/{child['id']}/suspend", {"reason": text, "requires_approval": True})


@dataclass(frozen=True)
class TextField:
    """Where an agent writes text, how it is read back, and the dashboard page showing it.

    ``refused(text)`` is the documented refusal for that text (422 for a value the field
    does not take, 404 for a "/" in a path segment, which no route matches) or None.
    ``shown`` says the page shows the text whole, so its escaped form must be on it.
    """

    write: Callable
    read: Callable
    page: Callable | None = None
    shown: bool = True
    refused: Callable[[str], int | None] = lambda text: None


def _invisible(text: str) -> bool:
    return any(unicodedata.category(ch) == "Cf" for ch in text)


def _in_path(text: str) -> int | None:
    return 404 if "/" in text else None


TEXT_FIELDS = {
    "fact key": TextField(
        lambda api, p, t: _fact(api, key=t),
        lambda api, p, r, t: api.get(f"/facts/{_q(t)}").json()["key"],
        lambda p, r, t: f"/facts/{_q(t)}/lineage/",
        # Keys name URLs: no "/"; nor invisible characters, which make look-alike keys.
        refused=lambda t: 422 if "/" in t or _invisible(t) else None,
    ),
    "fact subject": TextField(
        lambda api, p, t: _fact(api, subject=t),
        _fact_field("subject"),
        lambda p, r, t: "/facts/?validity=all",
    ),
    "fact value": TextField(
        lambda api, p, t: _fact(api, value=t),
        _fact_field("value"),
        lambda p, r, t: "/facts/?validity=all",
    ),
    "fact source": TextField(
        lambda api, p, t: _fact(api, source=t),
        _fact_field("source"),
        lambda p, r, t: "/facts/?validity=all",
    ),
    "handle content": TextField(
        _handle_document,
        _handle_content,
        lambda p, r, t: f"/sessions/{p['session_id']}/context-preview/",
        shown=False,  # the preview shows counts, not content
    ),
    "handle content, in the handles table": TextField(
        _handle_document,
        _handle_content,
        lambda p, r, t: f"/frames/{p['frame_id']}/handles/",
        shown=False,  # its first words only, whitespace collapsed
    ),
    "handle category": TextField(
        lambda api, p, t: api.post(
            f"/frames/{p['frame_id']}/handles", {"kind": "document", "content": "c", "category": t}
        ),
        lambda api, p, r, t: ContextHandle.objects.get(pk=r.json()["id"]).category,
        lambda p, r, t: f"/frames/{p['frame_id']}/handles/",
        refused=lambda t: 422 if len(t) > 40 else None,
    ),
    "handle tool_call_id": TextField(
        lambda api, p, t: api.post(
            f"/frames/{p['frame_id']}/handles",
            {"kind": "tool_call", "content": "call", "tool_call_id": t},
        ),
        lambda api, p, r, t: ContextHandle.objects.get(pk=r.json()["id"]).tool_call_id,
    ),
    "working-set key": TextField(
        lambda api, p, t: api.put(
            f"/sessions/{p['session_id']}/working-set/{_q(t)}", {"value": "v"}
        ),
        lambda api, p, r, t: api.get(f"/sessions/{p['session_id']}/working-set/{_q(t)}").json()[
            "key"
        ],
        refused=lambda t: _in_path(t) or (422 if _invisible(t) else None),
    ),
    "working-set value": TextField(
        lambda api, p, t: api.put(f"/sessions/{p['session_id']}/working-set/w", {"value": t}),
        lambda api, p, r, t: api.get(f"/sessions/{p['session_id']}/working-set/w").json()["value"],
    ),
    "RLM variable name": TextField(
        lambda api, p, t: api.put(f"/rlm/states/{p['state_id']}/variables/{_q(t)}", {"value": 1}),
        lambda api, p, r, t: api.get(f"/rlm/states/{p['state_id']}/variables/{_q(t)}").json()[
            "name"
        ],
        refused=lambda t: _in_path(t) or (None if t.isidentifier() else 422),
    ),
    "RLM variable value": TextField(
        lambda api, p, t: api.put(f"/rlm/states/{p['state_id']}/variables/v", {"value": t}),
        lambda api, p, r, t: api.get(f"/rlm/states/{p['state_id']}/variables/v").json()["value"],
        lambda p, r, t: f"/rlm/{p['state_id']}/",
    ),
    "RLM variable description": TextField(
        lambda api, p, t: api.put(
            f"/rlm/states/{p['state_id']}/variables/d", {"value": 1, "description": t}
        ),
        lambda api, p, r, t: api.get(f"/rlm/states/{p['state_id']}/variables/d").json()[
            "description"
        ],
        lambda p, r, t: f"/rlm/{p['state_id']}/",
    ),
    "RLM checkpoint name": TextField(
        lambda api, p, t: api.post(
            f"/rlm/states/{p['state_id']}/checkpoints", {"name": t, "description": t}
        ),
        lambda api, p, r, t: api.get(
            f"/rlm/states/{p['state_id']}/checkpoints/{r.json()['checkpoint_id']}"
        ).json()["name"],
        lambda p, r, t: f"/rlm/{p['state_id']}/",
    ),
    "session title": TextField(
        lambda api, p, t: _session_with(api, title=t),
        lambda api, p, r, t: api.get(f"/sessions/{r.json()['id']}").json()["title"],
        lambda p, r, t: "/",
    ),
    "session model": TextField(
        lambda api, p, t: _session_with(api, model=t),
        lambda api, p, r, t: api.get(f"/sessions/{r.json()['id']}").json()["model"],
        lambda p, r, t: "/",
        shown=False,
    ),
    **{
        f"identity {name}": TextField(
            lambda api, p, t, name=name: _session_with(api, identity={name: t}),
            _identity(name),
            lambda p, r, t: f"/sessions/{r.json()['id']}/",
        )
        for name in ("user_name", "user_id", "department", "organization")
    },
    "identity authority": TextField(
        lambda api, p, t: _session_with(api, identity={"authority": t}),
        _identity("authority"),
        refused=lambda t: 422,  # only the organization's ladder: policy, admin, ..., guest
    ),
    "identity permissions": TextField(
        lambda api, p, t: _session_with(api, identity={"permissions": [t]}),
        lambda api, p, r, t: _identity("permissions")(api, p, r, t)[0],
        lambda p, r, t: f"/sessions/{r.json()['id']}/",
        shown=False,  # shown as a list
    ),
    "environment location": TextField(
        lambda api, p, t: api.put(f"/sessions/{p['session_id']}/environment", {"location": t}),
        lambda api, p, r, t: api.get(f"/sessions/{p['session_id']}/environment").json()["location"],
        lambda p, r, t: f"/sessions/{p['session_id']}/",
    ),
    "message text": TextField(
        lambda api, p, t: api.post(
            f"/sessions/{p['session_id']}/messages", {"messages": [{"role": "user", "content": t}]}
        ),
        lambda api, p, r, t: _last_turn(api, p)["user_message"],
        lambda p, r, t: f"/sessions/{p['session_id']}/turns/",
    ),
    "message text block": TextField(
        lambda api, p, t: api.post(
            f"/sessions/{p['session_id']}/messages",
            {
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "Go on"}]},
                    {"role": "assistant", "content": [{"type": "text", "text": t}]},
                ]
            },
        ),
        lambda api, p, r, t: _last_turn(api, p)["assistant_response"],
        lambda p, r, t: f"/sessions/{p['session_id']}/turns/",
    ),
    "suspension reason": TextField(
        _suspend,
        lambda api, p, r, t: api.get(f"/suspensions/{r.json()['token']}").json()["reason"],
        lambda p, r, t: "/inbox/",
    ),
    "reservation purpose": TextField(
        lambda api, p, t: api.post(f"/frames/{p['frame_id']}/reserve", {"purpose": t, "amount": 1}),
        lambda api, p, r, t: _reserved_for(api, p, t),
    ),
    "context-pack query": TextField(
        lambda api, p, t: api.post(
            f"/sessions/{p['session_id']}/context-pack", {"budget_tokens": 2000, "query": t}
        ),
        lambda api, p, r, t: api.get(f"/sessions/{p['session_id']}/context-packs").json()[0][
            "query"
        ],
    ),
}


def _inert(html: str, text: str, shown: bool, secret_key: str) -> list[str]:
    problems = []
    for raw in ("<script>document.title", "<img src=x"):
        if raw in html:
            problems.append(f"raw HTML {raw!r} on the page")
    if secret_key in html:
        problems.append("SECRET_KEY on the page")
    if "sql_queries" in html:
        problems.append("{% debug %} was evaluated")
    if shown and escape(text) not in html:
        problems.append("the text is not shown as typed")
    return problems


@pytest.mark.parametrize("name", list(TEXT_FIELDS))
def test_injection_strings_in_every_text_field_are_stored_verbatim_or_refused(
    name, api, place, member_client, settings
):
    field = TEXT_FIELDS[name]
    bystanders = (organization_rows("Initech"), session_rows(place["neighbour_id"]))
    failures = []
    outcomes: Counter = Counter()
    for text in INJECTIONS:
        events = Event.objects.filter(session_id=place["session_id"]).count()
        response = field.write(api, place, text)
        refusal = field.refused(text)
        body = json.loads(response.content)
        outcomes[str(response.status_code)] += 1
        if response.status_code >= 500:
            failures.append(f"{text!r}: {response.status_code} {body}")
            continue
        if refusal is not None:
            code = {422: "validation_error", 404: "not_found"}[refusal]
            if response.status_code != refusal or body.get("error") != code:
                failures.append(f"{text!r}: expected {refusal} {code}, got {response.status_code}")
            elif refusal == 422 and not all(set(e) == {"loc", "msg"} for e in body["errors"]):
                failures.append(f"{text!r}: errors not in the documented format: {body}")
            if Event.objects.filter(session_id=place["session_id"]).count() != events:
                failures.append(f"{text!r}: a refused write left an event behind")
            continue
        if response.status_code not in (200, 201):
            failures.append(f"{text!r}: {response.status_code} {body}")
            continue
        stored = field.read(api, place, response, text)
        if stored != text:
            failures.append(f"{text!r}: read back as {stored!r}")
        if field.page is not None:
            page = member_client.get(field.page(place, response, text))
            if page.status_code != 200:
                failures.append(f"{text!r}: the page answered {page.status_code}")
            else:
                problems = _inert(page.content.decode(), text, field.shown, settings.SECRET_KEY)
                failures += [f"{text!r}: {p}" for p in problems]
                outcomes["page checked"] += 1
    figures_record(f"bad-input-{name.replace(' ', '-')}", dict(outcomes))
    assert failures == []
    assert (organization_rows("Initech"), session_rows(place["neighbour_id"])) == bystanders


# -- Numbers: negative, fractional, huge, and not numbers at all -----------------------

# (label, method, path, body, where the error points, error code)
NUMBERS = [
    ("usage negative", "post", "/frames/{frame_id}/usage",
     {"input_tokens": -1, "output_tokens": 0}, ["body", "input_tokens"]),
    ("usage above any model call", "post", "/frames/{frame_id}/usage",
     {"input_tokens": 10**12, "output_tokens": 0}, ["body", "input_tokens"]),
    ("usage fractional", "post", "/frames/{frame_id}/usage",
     {"input_tokens": 1, "output_tokens": 1.5}, ["body", "output_tokens"]),
    ("cache tokens negative", "post", "/frames/{frame_id}/usage",
     {"input_tokens": 1, "output_tokens": 1, "cache_read_input_tokens": -3},
     ["body", "cache_read_input_tokens"]),
    ("message usage negative", "post", "/sessions/{session_id}/messages",
     {"messages": [{"role": "user", "content": "hi"}], "usage": {"input_tokens": -1, "output_tokens": 1}},
     ["body", "usage", "input_tokens"]),
    ("message usage huge", "post", "/sessions/{session_id}/messages",
     {"messages": [{"role": "user", "content": "hi"}], "usage": {"input_tokens": 1, "output_tokens": 10**30}},
     ["body", "usage", "output_tokens"]),
    ("pack budget negative", "post", "/sessions/{session_id}/context-pack",
     {"budget_tokens": -1}, ["body", "budget_tokens"]),
    ("pack budget huge", "post", "/sessions/{session_id}/context-pack",
     {"budget_tokens": 10**30}, ["body", "budget_tokens"]),
    ("pack budget fractional", "post", "/sessions/{session_id}/context-pack",
     {"budget_tokens": 2000.5}, ["body", "budget_tokens"]),
    ("pack budget below the minimum", "post", "/sessions/{session_id}/context-pack",
     {"budget_tokens": 0}, None, "budget_too_small"),
    ("working-set ttl zero", "put", "/sessions/{session_id}/working-set/k",
     {"value": 1, "ttl_seconds": 0}, ["body", "ttl_seconds"]),
    ("working-set ttl negative", "put", "/sessions/{session_id}/working-set/k",
     {"value": 1, "ttl_seconds": -60}, ["body", "ttl_seconds"]),
    ("working-set ttl beyond a year", "put", "/sessions/{session_id}/working-set/k",
     {"value": 1, "ttl_seconds": 2**63}, ["body", "ttl_seconds"]),
    ("RLM ttl negative", "put", "/rlm/states/{state_id}/variables/t",
     {"value": 1, "scope": "temporary", "ttl_seconds": -1}, ["body", "ttl_seconds"]),
    ("RLM ttl beyond 32 bits", "put", "/rlm/states/{state_id}/variables/t",
     {"value": 1, "scope": "temporary", "ttl_seconds": 2**31}, ["body", "ttl_seconds"]),
    ("suspension expiry zero", "post", "/frames/{frame_id}/suspend",
     {"reason": "r", "expires_in_seconds": 0}, ["body", "expires_in_seconds"]),
    ("suspension expiry beyond 30 days", "post", "/frames/{frame_id}/suspend",
     {"reason": "r", "expires_in_seconds": 10**9}, ["body", "expires_in_seconds"]),
    ("attention negative", "post", "/handles/{handle_id}/attention",
     {"weight": -0.5}, ["body", "weight"]),
    ("attention above 100", "post", "/handles/{handle_id}/attention",
     {"weight": 101}, ["body", "weight"]),
    ("attention huge", "post", "/handles/{handle_id}/attention",
     {"weight": 1e308}, ["body", "weight"]),
    ("reservation zero", "post", "/frames/{frame_id}/reserve",
     {"purpose": "p", "amount": 0}, ["body", "amount"]),
    ("reservation negative", "post", "/frames/{frame_id}/reserve",
     {"purpose": "p", "amount": -1}, ["body", "amount"]),
    ("reservation huge", "post", "/frames/{frame_id}/reserve",
     {"purpose": "p", "amount": 10**30}, ["body", "amount"]),
    ("child budget huge", "post", "/sessions/{session_id}/frames",
     {"goal": "g", "parent_frame_id": "{frame_id}", "budget": {"total": 10**30}},
     ["body", "budget", "total"]),
    ("compaction target negative", "post", "/sessions/{session_id}/compactions",
     {"target_tokens": -1}, ["body", "target_tokens"]),
    ("compaction keep_turns huge", "post", "/sessions/{session_id}/compactions",
     {"keep_turns": 10**12}, ["body", "keep_turns"]),
    ("window below 1000", "post", "/sessions", {"context_window_tokens": 999},
     ["body", "context_window_tokens"]),
    ("window huge", "post", "/sessions", {"context_window_tokens": 10**30},
     ["body", "context_window_tokens"]),
    ("compaction threshold above 1", "post", "/sessions", {"compaction_threshold": 1.5},
     ["body", "compaction_threshold"]),
]  # fmt: skip


@pytest.fixture
def numbers_place(api, place):
    handle = api.post(
        f"/frames/{place['frame_id']}/handles", {"kind": "document", "content": "c"}
    ).json()
    return {**place, "handle_id": handle["id"]}


def _fill(value, ids):
    if isinstance(value, str):
        return value.format(**ids) if "{" in value else value
    if isinstance(value, dict):
        return {k: _fill(v, ids) for k, v in value.items()}
    return value


@pytest.mark.parametrize("case", NUMBERS, ids=[c[0] for c in NUMBERS])
def test_impossible_numbers_are_refused_and_change_nothing(case, api, numbers_place):
    label, method, path, body, loc, *code = case
    before = organization_rows("Acme")
    response = getattr(api, method)(path.format(**numbers_place), _fill(body, numbers_place))
    assert response.status_code == 422, response.content
    answer = response.json()
    assert answer["error"] == (code[0] if code else "validation_error"), answer
    assert answer["detail"]
    if loc is not None:
        assert answer["errors"][0]["loc"] == loc, answer
    assert organization_rows("Acme") == before


LIST_LIMITS = [
    "/sessions",
    "/facts",
    "/rlm/states",
    "/sessions/{session_id}/events",
    "/sessions/{session_id}/turns",
    "/sessions/{session_id}/context-packs",
    "/frames/{frame_id}/children",
    "/rlm/states/{state_id}/mutations",
]


SCHEMA = ninja_api.get_openapi_schema()


def _query_parameters(path: str) -> list[str]:
    operation = SCHEMA["paths"]["/api/v1" + path]["get"]
    return [p["name"] for p in operation.get("parameters", []) if p["in"] == "query"]


OUT_OF_RANGE = {
    "limit": ["-1", "0", "1000001", "99999999999999999999999999999", "1.5", "ten"],
    "after": ["-5", "1.5"],
    "offset": ["-1", "99999999999999999999999999999"],
}
LIMIT_CASES = [
    (path, param, value)
    for path in LIST_LIMITS
    for param in _query_parameters(path)
    for value in OUT_OF_RANGE.get(param, [])
]


@pytest.mark.parametrize("path,param,value", LIMIT_CASES)
def test_limits_and_cursors_out_of_range_are_refused(path, param, value, api, place):
    response = api.get(path.format(**place), {param: value})
    assert response.status_code == 422, response.content
    assert response.json()["error"] == "validation_error"
    assert response.json()["errors"][0]["loc"] == ["query", param]


def test_numbers_beyond_a_frames_budget_get_the_budget_answers(api, place):
    """Within the schema but beyond the budget: reservations and children are refused
    with what was asked and what is left; usage is what the model spent, so it is
    recorded even past the total, and the books still balance."""
    session, frame = place["session_id"], place["frame_id"]
    child = api.post(
        f"/sessions/{session}/frames",
        {"goal": "small", "parent_frame_id": frame, "budget": {"total": 100}},
    ).json()
    before = session_rows(session)
    reserve = api.post(f"/frames/{child['id']}/reserve", {"purpose": "p", "amount": 101})
    assert reserve.status_code == 409
    assert reserve.json() | {"detail": ""} == {
        "error": "insufficient_tokens",
        "detail": "",
        "requested": 101,
        "available": 100,
    }
    grandchild = api.post(
        f"/sessions/{session}/frames",
        {"goal": "too big", "parent_frame_id": child["id"], "budget": {"total": 10**9}},
    )
    assert grandchild.status_code == 409
    assert grandchild.json()["error"] == "insufficient_tokens"
    assert grandchild.json()["requested"] == 10**9 and grandchild.json()["available"] == 100
    assert session_rows(session) == before
    spent = api.post(
        f"/frames/{child['id']}/usage", {"input_tokens": 10**9, "output_tokens": 10**9}
    )
    assert spent.status_code == 200
    assert spent.json()["budget"]["used"] == 2 * 10**9
    assert spent.json()["budget"]["available"] == 0  # never below zero
    assert api.post(f"/frames/{child['id']}/pop", {"status": "completed"}).status_code == 200
    assert budget_audit(Frame.objects.get(pk=frame).session) == []
    pack = api.post(f"/sessions/{session}/context-pack", {"budget_tokens": 10**7}).json()
    assert pack["token_summary"]["used"] <= pack["token_summary"]["budget"] == 10**7


# NaN, Infinity and numbers no float holds: Python's json module reads them, no JSON
# column can store them, and a response holding one is not JSON.
NOT_JSON_NUMBERS = ["NaN", "Infinity", "-Infinity", "1e400"]
JSON_VALUES = [
    ("frame inputs", "post", "/sessions/{session_id}/frames",
     '{{"goal": "g", "budget": {{"total": 1}}, "inputs": {{"x": {n}}}}}'),
    ("fact value", "post", "/facts", '{{"key": "n", "value": {n}, "source": "user"}}'),
    ("fact constraint", "post", "/facts",
     '{{"key": "c", "subject": "s", "value": 1, "source": "policy", "is_constraint": true, '
     '"constraint": {{"max": {n}}}}}'),
    ("working-set value", "put", "/sessions/{session_id}/working-set/n", '{{"value": {n}}}'),
    ("RLM variable value", "put", "/rlm/states/{state_id}/variables/n", '{{"value": {n}}}'),
    ("RLM execution config", "post", "/rlm/states",
     '{{"prompt": "p", "execution_config": {{"x": {n}}}}}'),
    ("environment data", "put", "/sessions/{session_id}/environment",
     '{{"external_data": {{"x": {n}}}}}'),
    ("message block", "post", "/sessions/{session_id}/messages",
     '{{"messages": [{{"role": "user", "content": [{{"type": "text", "text": "x", "n": {n}}}]}}]}}'),
    ("pop result refs", "post", "/frames/{frame_id}/pop",
     '{{"status": "completed", "result_refs": [{n}]}}'),
    ("constraint check value", "post", "/constraints/check", '{{"subject": "s", "value": {n}}}'),
]  # fmt: skip


@pytest.mark.parametrize("case", JSON_VALUES, ids=[c[0] for c in JSON_VALUES])
def test_numbers_json_cannot_hold_are_refused_wherever_they_appear(case, api, place):
    label, method, path, template = case
    before = (session_rows(place["session_id"]), organization_rows("Acme"))
    answers = {}
    for number in NOT_JSON_NUMBERS:
        response = getattr(api.client, method)(
            "/api/v1" + path.format(**place),
            data=template.format(n=number),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {api.key}",
        )
        error = json.loads(response.content).get("error")  # Python's json reads NaN too
        answers[number] = (response.status_code, error)
    assert answers == dict.fromkeys(NOT_JSON_NUMBERS, (422, "validation_error"))
    assert (session_rows(place["session_id"]), organization_rows("Acme")) == before
