"""The Usage page: tokens and cost per day by model and by agent, drawn as SVG."""

from datetime import date
from decimal import Decimal

import pytest
from django.test import Client

from frames import charts

pytestmark = pytest.mark.usefixtures("prices")


def test_it_charts_tokens_and_cost_by_model_and_agent(api, start_session, push_ok, member_client):
    session = start_session(model="claude-sonnet-4-5")
    frame = push_ok(session["id"], 5_000_000)
    api.post(f"/frames/{frame['id']}/usage", {"input_tokens": 1_000_000, "output_tokens": 0})
    api.post(
        f"/frames/{frame['id']}/usage",
        {"input_tokens": 10, "output_tokens": 0, "model": "homegrown-7b"},
    )
    page = member_client.get("/usage/")
    html = page.content.decode()
    assert page.status_code == 200
    assert html.count("<svg") == 4 and "<rect" in html
    assert "claude-sonnet-4-5" in html and "researcher" in html
    assert 'id="usage-total-cost">$3.00<' in html
    assert "unknown model: no price (homegrown-7b)" in html
    assert "1,000,010" in html


def test_it_shows_nothing_of_another_organization(api, start_session, push_ok, make_user):
    session = start_session(model="claude-sonnet-4-5")
    frame = push_ok(session["id"], 5_000_000)
    api.post(f"/frames/{frame['id']}/usage", {"input_tokens": 1_000_000, "output_tokens": 0})
    outsider = Client()
    outsider.force_login(make_user(username="globex", org="Globex"))
    html = outsider.get("/usage/").content.decode()
    assert "claude-sonnet-4-5" not in html and "<rect" not in html and "$0.00" in html


def test_money_axes_read_with_two_decimals():
    days = [date(2026, 11, 1), date(2026, 11, 2)]
    chart = charts.stacked(days, {"m": [Decimal("0.4"), Decimal("0.1")]}, money=True)
    assert [t["text"] for t in chart.ticks] == ["$0.00", "$0.12", "$0.25", "$0.38", "$0.50"]
    tiny = charts.stacked(days, {"m": [Decimal("0.0017"), 0]}, money=True)
    assert [t["text"] for t in tiny.ticks] == [
        "$0.0000",
        "$0.0005",
        "$0.0010",
        "$0.0015",
        "$0.0020",
    ]
