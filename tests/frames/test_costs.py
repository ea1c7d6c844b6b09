"""Cost in money: a price table per model, and cost_usd on sessions, frames and calls."""

from decimal import Decimal

import pytest
from django.test import Client

from frames.costs import Price, call_cost, price_for
from frames.models import ModelPrice
from frames.selectors import price_table

pytestmark = pytest.mark.usefixtures("prices")

SONNET = Price(Decimal("3"), Decimal("15"), Decimal("3.75"), Decimal("6"), Decimal("0.30"))


def test_it_prices_each_kind_of_token_at_its_own_rate():
    assert call_cost(SONNET, input_tokens=1_000_000, output_tokens=0) == Decimal(3)
    assert call_cost(
        SONNET,
        input_tokens=0,
        output_tokens=1_000_000,
        cache_creation_input_tokens=1_000_000,
        cache_read_input_tokens=1_000_000,
    ) == Decimal("19.05")
    assert call_cost(None, input_tokens=10, output_tokens=10) is None


def test_it_finds_a_dated_models_price_and_no_price_for_an_unknown_one():
    prices = {"claude-sonnet-4-5": SONNET, "claude-sonnet-4": Price(Decimal(1), Decimal(1))}
    assert price_for("claude-sonnet-4-5-20250929", prices) is SONNET
    assert price_for("claude-sonnet-4-5", prices) is SONNET
    assert price_for("llama-3", prices) is None
    assert price_for("", prices) is None


def test_it_ships_current_prices_as_data(db):
    sonnet = ModelPrice.objects.get(model="claude-sonnet-4-5")
    assert (
        sonnet.input_per_mtok,
        sonnet.output_per_mtok,
        sonnet.cache_write_5m_per_mtok,
        sonnet.cache_write_1h_per_mtok,
        sonnet.cache_read_per_mtok,
    ) == (Decimal(3), Decimal(15), Decimal("3.75"), Decimal(6), Decimal("0.30"))
    assert ModelPrice.objects.get(model="gpt-4o").cache_read_per_mtok == Decimal("1.25")
    assert ModelPrice.objects.get(model="gpt-5").input_per_mtok == Decimal("1.25")
    assert ModelPrice.objects.get(model="claude-opus-4-1").output_per_mtok == Decimal(75)
    assert ModelPrice.objects.get(model="claude-haiku-4-5").input_per_mtok == Decimal(1)
    # The models the docs' examples use are priced, dated names too.
    assert price_for("claude-sonnet-4-6-20260217", price_table()) == SONNET
    assert ModelPrice.objects.get(model="claude-opus-4-6").output_per_mtok == Decimal(25)


def test_a_million_uncached_sonnet_input_tokens_cost_three_dollars(api, start_session, push_ok):
    session = start_session(model="claude-sonnet-4-5")
    frame = push_ok(session["id"], 2_000_000)
    assert (
        api.post(
            f"/frames/{frame['id']}/usage", {"input_tokens": 1_000_000, "output_tokens": 0}
        ).status_code
        == 200
    )
    answer = api.get(f"/sessions/{session['id']}").json()
    assert answer["cost_usd"] == 3.0 and answer["unpriced_models"] == []
    listed = api.get("/sessions").json()["items"][0]
    assert listed["id"] == session["id"] and listed["cost_usd"] == 3.0


def test_a_frames_cost_rolls_up_its_descendants(api, start_session, push_ok):
    session = start_session(model="claude-sonnet-4-5")
    root = push_ok(session["id"], 5_000_000)
    child = push_ok(session["id"], 2_000_000, parent=root["id"])
    api.post(f"/frames/{root['id']}/usage", {"input_tokens": 1_000_000, "output_tokens": 0})
    api.post(
        f"/frames/{child['id']}/usage",
        {"input_tokens": 0, "output_tokens": 100_000, "model": "gpt-4o"},
    )
    assert api.get(f"/frames/{child['id']}").json()["cost_usd"] == 1.0
    assert api.get(f"/frames/{root['id']}").json()["cost_usd"] == 4.0


def test_an_unknown_model_has_no_price_and_says_so(api, start_session, push_ok, member_client):
    session = start_session(model="homegrown-7b")
    frame = push_ok(session["id"], 100_000)
    api.post(f"/frames/{frame['id']}/usage", {"input_tokens": 1000, "output_tokens": 10})
    answer = api.get(f"/sessions/{session['id']}").json()
    assert answer["cost_usd"] == 0.0 and answer["unpriced_models"] == ["homegrown-7b"]
    page = member_client.get(f"/sessions/{session['id']}/").content.decode()
    assert "unknown model: no price" in page


def test_an_admin_edits_a_price_and_costs_follow(api, start_session, push_ok, make_user):
    session = start_session(model="claude-sonnet-4-5")
    frame = push_ok(session["id"], 2_000_000)
    api.post(f"/frames/{frame['id']}/usage", {"input_tokens": 1_000_000, "output_tokens": 0})
    admin = Client()
    user = make_user(username="root", admin=True)
    user.is_superuser = True
    user.save()
    admin.force_login(user)
    price = ModelPrice.objects.get(model="claude-sonnet-4-5")
    page = admin.get(f"/admin/frames/modelprice/{price.pk}/change/")
    assert page.status_code == 200
    response = admin.post(
        f"/admin/frames/modelprice/{price.pk}/change/",
        {
            "model": "claude-sonnet-4-5",
            "provider": "anthropic",
            "input_per_mtok": "4",
            "output_per_mtok": "15",
            "cache_write_5m_per_mtok": "3.75",
            "cache_write_1h_per_mtok": "6",
            "cache_read_per_mtok": "0.30",
        },
    )
    assert response.status_code == 302, response.content[:2000]
    assert api.get(f"/sessions/{session['id']}").json()["cost_usd"] == 4.0


def test_a_negative_price_is_refused_by_the_form_and_the_database(make_user):
    from django.db import IntegrityError, transaction

    admin = Client()
    user = make_user(username="root", admin=True)
    user.is_superuser = True
    user.save()
    admin.force_login(user)
    body = {
        "model": "my-local-llama",
        "provider": "",
        "input_per_mtok": "-1",
        "output_per_mtok": "0",
        "cache_write_5m_per_mtok": "0",
        "cache_write_1h_per_mtok": "0",
        "cache_read_per_mtok": "-0.5",
    }
    response = admin.post("/admin/frames/modelprice/add/", body)
    assert response.status_code == 200  # the form again, with its errors
    assert response.content.decode().count("A price cannot be negative.") == 2
    assert not ModelPrice.objects.filter(model="my-local-llama").exists()
    with pytest.raises(IntegrityError), transaction.atomic():
        ModelPrice.objects.create(model="my-local-llama", input_per_mtok=-1, output_per_mtok=0)
    response = admin.post(
        "/admin/frames/modelprice/add/", {**body, "input_per_mtok": "0", "cache_read_per_mtok": "0"}
    )
    assert response.status_code == 302
    assert ModelPrice.objects.filter(model="my-local-llama").exists()  # a free local model


def test_another_organization_sees_no_cost_of_ours(other_api, api, start_session):
    session = start_session(model="claude-sonnet-4-5")
    assert other_api.get(f"/sessions/{session['id']}").status_code == 404
