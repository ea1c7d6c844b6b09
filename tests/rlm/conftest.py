"""Fixtures for RLM state tests: the seed document from tests/fixtures (never /work/shared)."""

from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator

from frames.models import Frame, Session

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "rlm" / "seed_004_rlm_state.yaml"
SCHEMA_KEYWORDS = (
    "$schema",
    "$id",
    "title",
    "description",
    "type",
    "required",
    "properties",
    "$defs",
)


@pytest.fixture(scope="session")
def seed_document() -> dict:
    return yaml.safe_load(FIXTURE.read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def seed_validator(seed_document) -> Draft202012Validator:
    """The JSON Schema part of the seed file, loaded independently of the app's copy."""
    schema = {k: seed_document[k] for k in SCHEMA_KEYWORDS}
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


@pytest.fixture
def assert_valid_export(seed_validator):
    def check(document: dict) -> dict:
        errors = [
            f"{list(e.absolute_path)}: {e.message}" for e in seed_validator.iter_errors(document)
        ]
        assert errors == [], errors
        variable_schema = seed_validator.schema["$defs"]["Variable"]
        sub = Draft202012Validator({"$defs": seed_validator.schema["$defs"], **variable_schema})
        for name, variable in document["variables"].items():
            bad = [e.message for e in sub.iter_errors(variable)]
            assert bad == [], (name, bad)
        return document

    return check


@pytest.fixture
def org(api):
    return api.organization


@pytest.fixture
def make_session(org):
    def make(organization=None, **fields):
        fields.setdefault("identity", {"user_name": "Ada", "authority": "employee"})
        return Session.objects.create(organization=organization or org, **fields)

    return make


@pytest.fixture
def make_frame():
    def make(session, parent=None, goal="Investigate", **fields):
        fields.setdefault("budget_total", 100_000)
        frame = Frame.objects.create(
            session=session,
            organization=session.organization,
            parent=parent,
            depth=(parent.depth + 1) if parent else 0,
            goal=goal,
            **fields,
        )
        if parent is not None:
            Frame.objects.filter(pk=parent.pk).update(
                subcall_allocation=parent.subcall_allocation + frame.budget_total
            )
            parent.refresh_from_db()
        return frame

    return make


@pytest.fixture
def new_state(api):
    """POST /rlm/states and return the body."""

    def make(prompt: str = "Find all TypeScript errors in the codebase", **extra) -> dict:
        response = api.post("/rlm/states", {"prompt": prompt, **extra})
        assert response.status_code == 201, response.content
        return response.json()

    return make
