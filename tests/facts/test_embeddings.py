"""Each fact version and working-set put is stored with the vector of ``"{key}: {value}"``,
the text a context shows: a superseding version is a new row with its own vector, the
superseded one keeps its own. A failing provider stores the write without one."""

import logging

import numpy as np

from contextops.embeddings import vector_from_bytes
from facts.models import Fact, WorkingSetItem
from facts.services import fact_write, working_set_put


def vector_of(fake_embedder, text):
    vector = fake_embedder.embed([text])[0]
    return vector / np.linalg.norm(vector)


def stored(model, **lookup):
    return vector_from_bytes(model.objects.get(**lookup).embedding)


def test_a_fact_written_through_the_api_stores_the_vector_of_its_context_text(
    api, write, fake_embedder
):
    write(api, key="office_city", value="Lyon")
    write(api, key="office_size", value={"desks": 40, "floors": 2})
    assert np.allclose(
        stored(Fact, key="office_city"), vector_of(fake_embedder, "office_city: Lyon"), atol=2e-3
    )
    assert np.allclose(
        stored(Fact, key="office_size"),
        vector_of(fake_embedder, 'office_size: {"desks": 40, "floors": 2}'),
        atol=2e-3,
    )
    assert (
        Fact.objects.get(key="office_size").embedding_text
        == 'office_size: {"desks": 40, "floors": 2}'
    )


def test_a_superseding_version_is_a_new_row_with_its_own_vector(api, write, fake_embedder):
    write(api, key="deadline_v1", value="Friday")
    write(api, key="deadline_v2", value="Monday", supersedes="deadline_v1")
    old, new = Fact.objects.get(key="deadline_v1"), Fact.objects.get(key="deadline_v2")
    assert old.status == "superseded" and new.is_valid
    assert np.allclose(
        vector_from_bytes(old.embedding), vector_of(fake_embedder, "deadline_v1: Friday"), atol=2e-3
    )
    assert np.allclose(
        vector_from_bytes(new.embedding), vector_of(fake_embedder, "deadline_v2: Monday"), atol=2e-3
    )


def test_an_implicit_supersession_and_a_proposal_are_embedded_too(make_api, fake_embedder):
    org = make_api(authority="admin").organization
    fact_write(organization=org, key="budget", value=100, subject="budget", authority="admin")
    fact_write(organization=org, key="budget_new", value=120, subject="budget", authority="admin")
    fact_write(organization=org, key="budget_guess", value=90, subject="budget", authority="intern")
    statuses = dict(Fact.objects.values_list("key", "status"))
    assert statuses == {"budget": "superseded", "budget_new": "active", "budget_guess": "proposal"}
    for key, value in (("budget", 100), ("budget_new", 120), ("budget_guess", 90)):
        assert np.allclose(
            stored(Fact, key=key), vector_of(fake_embedder, f"{key}: {value}"), atol=2e-3
        )


def test_the_default_model_embeds_a_fact(api, write, settings):
    settings.CONTEXTOPS_EMBEDDINGS = "wordllama"
    write(api, key="customer_tier", value="gold")
    vector = stored(Fact, key="customer_tier")
    assert vector is not None and vector.shape == (256,)


def test_a_failing_provider_never_loses_a_fact(api, write, fake_embedder, caplog):
    fake_embedder.failing = True
    with caplog.at_level(logging.WARNING, logger="contextops.embeddings"):
        body = write(api, key="kept", value="even so")
    assert body["key"] == "kept"
    assert Fact.objects.get(key="kept").embedding is None
    assert "embeddings_backfill" in caplog.text


def test_each_working_set_put_stores_the_vector_of_its_value(api, make_session, fake_embedder):
    session = make_session(api)
    path = f"/sessions/{session.id}/working-set/draft"
    assert api.put(path, {"value": "first outline"}).status_code == 200
    assert np.allclose(
        stored(WorkingSetItem, session=session, key="draft"),
        vector_of(fake_embedder, "draft: first outline"),
        atol=2e-3,
    )
    api.put(path, {"value": {"sections": ["intro", "costs"]}})
    item = WorkingSetItem.objects.get(session=session, key="draft")
    assert item.embedding_text == 'draft: {"sections": ["intro", "costs"]}'
    assert np.allclose(
        vector_from_bytes(item.embedding), vector_of(fake_embedder, item.embedding_text), atol=2e-3
    )


def test_a_failing_provider_never_loses_a_working_set_put(api, make_session, fake_embedder):
    session = make_session(api)
    working_set_put(session=session, key="scratch", value="one")
    fake_embedder.failing = True
    item = working_set_put(session=session, key="scratch", value="two")
    item.refresh_from_db()
    # The vector of "one" would no longer say what the item holds: NULL until the backfill.
    assert item.value == "two" and item.embedding is None
