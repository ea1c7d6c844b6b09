"""The Usage page: tokens and cost per day by model and by agent, drawn as SVG."""

from datetime import date, timedelta
from decimal import Decimal

import pytest
from django.test import Client
from django.utils import timezone

from frames import charts, selectors
from frames.models import Session, Usage

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


def _record(client, frame_id, **usage):
    usage.setdefault("output_tokens", 0)
    response = client.post(f"/frames/{frame_id}/usage", usage)
    assert response.status_code in (200, 201), response.content


@pytest.fixture
def two_agents(api, make_api, start_session, push_ok):
    """Acme's researcher on claude-sonnet-4-5 ($3.01005) and writer on claude-haiku-4-5
    ($0.0017) and an unpriced model; Globex's calls on gpt-5, which Acme must never see."""
    writer = make_api(agent="writer")
    research = start_session(model="claude-sonnet-4-5")
    frame = push_ok(research["id"], 5_000_000)
    _record(api, frame["id"], input_tokens=1_000_000)  # $3
    _record(  # 100 × $3 + 1,000 × $3.75 + 10,000 × $0.30 + 200 × $15, per million
        api,
        frame["id"],
        input_tokens=100,
        cache_creation_input_tokens=1_000,
        cache_read_input_tokens=10_000,
        output_tokens=200,
    )
    writing = start_session(writer, model="claude-haiku-4-5")
    frame = push_ok(writing["id"], 5_000_000, client=writer)
    _record(writer, frame["id"], input_tokens=1_000, output_tokens=140)  # $0.0017
    _record(writer, frame["id"], input_tokens=10, model="homegrown-7b")  # no price
    globex = make_api(org="Globex", agent="intruder")
    elsewhere = start_session(globex, model="gpt-5")
    frame = push_ok(elsewhere["id"], 5_000_000, client=globex)
    _record(globex, frame["id"], input_tokens=7_000_000, output_tokens=0)
    return research, writing


def test_it_totals_by_model_and_by_agent_to_the_headline(two_agents, member_client):
    page = member_client.get("/usage/")
    html = page.content.decode()
    totals = page.context["totals"]
    by_model = {t.name: t for t in totals.by_model}
    by_agent = {t.name: t for t in totals.by_agent}
    assert list(by_model) == ["claude-sonnet-4-5", "claude-haiku-4-5", "homegrown-7b"]
    sonnet, haiku, homegrown = by_model.values()
    assert (sonnet.calls, sonnet.input_tokens, sonnet.output_tokens) == (2, 1_000_100, 200)
    assert (sonnet.cache_creation_input_tokens, sonnet.cache_read_input_tokens) == (1_000, 10_000)
    assert sonnet.cost.usd == Decimal("3.01005") and haiku.cost.usd == Decimal("0.0017")
    assert not homegrown.priced and homegrown.calls == 1
    assert list(by_agent) == ["researcher", "writer"]
    assert by_agent["writer"].cost.unpriced_models == ("homegrown-7b",)
    assert by_agent["writer"].tokens == 1_150
    headline = page.context["total_cost"]
    assert headline == Decimal("3.01175")
    assert sum(t.cost.usd for t in by_model.values()) == headline
    assert sum(t.cost.usd for t in by_agent.values()) == headline
    assert totals.total.calls == 4 == sum(t.calls for t in by_agent.values())
    assert page.context["total_tokens"] == sum(t.tokens for t in by_model.values()) == 1_012_450
    # The same figures the sessions list and each session's page show.
    research, writing = two_agents
    for agent, session in (("researcher", research), ("writer", writing)):
        cost = selectors.session_cost(Session.objects.get(pk=session["id"]))
        assert by_agent[agent].cost == cost
    model_table = html[html.index('id="usage-by-model"') : html.index('id="usage-by-agent"')]
    assert '<td>claude-haiku-4-5</td><td class="num">1</td>' in model_table
    assert ">$0.0017<" in model_table and ">$3.01<" in model_table
    assert ">no price<" in model_table and ">10,000<" in model_table
    assert model_table.count(">$3.01<") == 2  # sonnet, and the total row
    assert 'id="usage-total-cost">$3.01<' in html


def test_it_never_counts_another_organizations_calls(two_agents, member_client):
    page = member_client.get("/usage/")
    html = page.content.decode()
    assert "gpt-5" not in html and "intruder" not in html and "7,0" not in html
    assert {t.name for t in page.context["totals"].by_agent} == {"researcher", "writer"}


def _calls(session, count: int) -> None:
    Usage.objects.bulk_create(
        Usage(session=session, model=("claude-sonnet-4-5", "gpt-5", "")[n % 3], input_tokens=n)
        for n in range(count)
    )


def test_its_queries_do_not_grow_with_the_calls(
    api, start_session, member_client, django_assert_max_num_queries
):
    session = Session.objects.get(pk=start_session(model="claude-sonnet-4-5")["id"])
    counts = []
    for total in (3, 300):
        _calls(session, total - Usage.objects.filter(session=session).count())
        with django_assert_max_num_queries(7) as captured:
            page = member_client.get("/usage/")
        assert page.context["totals"].total.calls == total
        counts.append(len(captured.captured_queries))
    assert counts[0] == counts[1]


@pytest.mark.parametrize("days", ["abc", "-1", "100000", "", "7.0", "0"])
def test_an_unknown_window_is_the_last_30_days(days, member_client):
    page = member_client.get("/usage/", {"days": days})
    assert page.status_code == 200 and page.context["days"] == 30
    assert '<a href="?days=30" aria-current="page">' in page.content.decode()


def test_a_window_counts_the_calls_of_its_days(api, start_session, push_ok, member_client):
    frame = push_ok(start_session(model="claude-sonnet-4-5")["id"], 5_000_000)
    _record(api, frame["id"], input_tokens=1_000_000)  # today: $3
    ten_days_ago = (timezone.now() - timedelta(days=10)).isoformat()
    _record(api, frame["id"], input_tokens=2_000_000, started_at=ten_days_ago)  # $6
    week = member_client.get("/usage/?days=7")
    html = week.content.decode()
    assert week.context["totals"].total.calls == 1 and week.context["total_cost"] == 3
    assert '<a href="?days=7" aria-current="page">' in html and "The last 7 days" in html
    assert html.count('aria-current="page">Last') == 1
    quarter = member_client.get("/usage/?days=90")
    assert quarter.context["totals"].total.calls == 2 and quarter.context["total_cost"] == 9


def test_model_prices_link_to_the_admin_for_who_may_read_them(member_client, make_user):
    assert 'href="/admin/frames/modelprice/"' not in member_client.get("/usage/").content.decode()
    admin = Client()
    admin.force_login(make_user(username="boss", admin=True))
    html = admin.get("/usage/").content.decode()
    assert '<a href="/admin/frames/modelprice/">Model prices</a>' in html
    assert admin.get("/admin/frames/modelprice/").status_code == 200


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
