"""measure_growth: rows and bytes per row of the tables, and what an agent-day adds."""

import json

import pytest
from django.core.management import CommandError, call_command

from frames.models import Event, Frame
from tests.conftest import IS_POSTGRES
from tests.frames.test_projections import _busy_session


def test_it_measures_rows_per_table_and_bytes_per_agent_day(api, capsys):
    _busy_session(api)
    call_command(
        "measure_growth", "--json", "--agent-day", "sessions=2,frames=10,calls=20,events=100"
    )
    report = json.loads(capsys.readouterr().out)
    tables = {row["table"]: row for row in report["tables"]}
    assert report["sessions"] == 1
    assert tables["frames_event"]["rows"] == Event.objects.count()
    assert tables["frames_frame"]["rows_per_session"] == Frame.objects.count()
    if IS_POSTGRES:
        event = tables["frames_event"]
        assert event["bytes"] > 0 and event["bytes_per_row"] == round(
            event["bytes"] / event["rows"]
        )
        assert 28 < event["row_bytes"] < event["bytes_per_row"]  # heap only, no empty pages
        assert event["bytes_per_agent_day"] == 100 * event["row_bytes"] * 2
        assert report["agent_day_bytes"] >= event["bytes_per_agent_day"]
    else:
        assert tables["frames_event"]["bytes"] is None  # SQLite does not say
        assert tables["frames_event"]["row_bytes"] is None


def test_it_prints_a_table_for_people(api, capsys):
    _busy_session(api)
    call_command("measure_growth", "--agent-day", "events=10")
    out = capsys.readouterr().out
    assert "frames_event" in out and "bytes/agent-day" in out and "total per agent-day" in out


@pytest.mark.parametrize(
    ("profile", "message"),
    [("frames=ten", "frames needs a number"), ("widgets=3", "unknown quantity 'widgets'")],
)
def test_a_bad_profile_is_refused_with_what_is_wrong(db, profile, message):
    with pytest.raises(CommandError, match=message):
        call_command("measure_growth", "--agent-day", profile)
