"""The RLM limits at their edges, without a database: exactly at the limit is allowed, one
past it is refused (or, for an inline value, goes to a file)."""

from types import SimpleNamespace

import pytest

from contextops.errors import Conflict, Invalid
from frames.rlm.interchange import import_plan
from frames.rlm.values import MAX_INLINE_BYTES, MAX_NAME_LENGTH, MAX_VARIABLES, value_store
from frames.rlm.values import validate_name as name_valid


def test_a_name_of_the_longest_length_is_a_name_and_one_character_more_is_not():
    assert name_valid("a" * MAX_NAME_LENGTH, field="name") == "a" * MAX_NAME_LENGTH
    with pytest.raises(Invalid) as refused:
        name_valid("a" * (MAX_NAME_LENGTH + 1), field="name")
    assert refused.value.extra["limit"] == MAX_NAME_LENGTH


def _text_of(size: int) -> str:
    """A text whose compact JSON (its two quotes included) is ``size`` bytes."""
    return "x" * (size - 2)


def test_a_value_of_exactly_the_inline_limit_stays_inline_and_one_byte_more_goes_to_a_file(
    settings, tmp_path
):
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path)},
        },
    }
    state = SimpleNamespace(organization_id=1, state_id="state-0000edge")
    inline, file_name, size = value_store(state, "v", _text_of(MAX_INLINE_BYTES))
    assert (file_name, size) == ("", MAX_INLINE_BYTES) and inline is not None
    inline, file_name, size = value_store(state, "v", _text_of(MAX_INLINE_BYTES + 1))
    assert inline is None and file_name and size == MAX_INLINE_BYTES + 1


def _document(count: int) -> dict:
    variables = {f"v{i}": {"name": f"v{i}", "value": i, "type": "number"} for i in range(count)}
    return {"version": "1.0.0", "state_id": "state-0000beef", "variables": variables}


def test_an_import_of_exactly_the_most_variables_is_planned_and_one_more_is_refused():
    assert len(import_plan(_document(MAX_VARIABLES)).variables) == MAX_VARIABLES
    with pytest.raises(Conflict) as refused:
        import_plan(_document(MAX_VARIABLES + 1))
    assert refused.value.code == "variable_limit_reached"
