"""Each handle gets its vector when its text is written (never when a pack is made): on
add, through the API and the service, and when a page-in loads a cold resource. A failing
provider stores the handle without one."""

import logging

import numpy as np

from contextops.embeddings import vector_from_bytes
from frames.models import ContextHandle
from frames.services.handles import handle_add


def unit(vector):
    return vector / np.linalg.norm(vector)


def stored(handle) -> np.ndarray | None:
    return vector_from_bytes(ContextHandle.objects.get(pk=handle.pk).embedding)


def test_a_handle_added_through_the_api_is_stored_with_its_vector(
    api, session, frame, fake_embedder
):
    response = api.post(
        f"/frames/{frame.id}/handles",
        {"kind": "message", "content": "The build is green again", "priority": "high"},
    )
    assert response.status_code == 201, response.content
    handle = ContextHandle.objects.get(pk=response.json()["id"])
    expected = unit(sum(fake_embedder.word(w) for w in ("The", "build", "is", "green", "again")))
    assert np.allclose(vector_from_bytes(handle.embedding), expected, atol=2e-3)
    assert fake_embedder.calls == [["The build is green again"]]


def test_a_reference_without_content_is_embedded_from_its_ref(frame, fake_embedder):
    handle = handle_add(
        frame=frame, kind="document", ref="s3://reports/q3-revenue.pdf", estimated_tokens=900
    )
    assert handle.embedding_text == "s3://reports/q3-revenue.pdf"
    assert np.allclose(stored(handle), unit(fake_embedder.embed([handle.ref])[0]), atol=2e-3)


def test_the_default_model_embeds_a_handle_on_add(frame, settings):
    settings.CONTEXTOPS_EMBEDDINGS = "wordllama"
    handle = handle_add(frame=frame, kind="message", content="Deploy to staging")
    vector = stored(handle)
    assert vector is not None and vector.shape == (256,)
    assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-2


def test_a_page_in_that_loads_a_cold_resource_embeds_its_content(
    api, settings, tmp_path, frame, fake_embedder
):
    settings.CONTEXTOPS_RESOURCE_ROOTS = [str(tmp_path)]
    (tmp_path / "runbook.md").write_text("Restart the queue workers first")
    handle = handle_add(frame=frame, kind="document", ref="file:runbook.md", state="cold")
    assert np.allclose(stored(handle), unit(fake_embedder.embed(["file:runbook.md"])[0]), atol=2e-3)
    response = api.post(f"/handles/{handle.id}/page-in?mode=full")
    assert response.status_code == 200, response.content
    assert np.allclose(
        stored(handle), unit(fake_embedder.embed(["Restart the queue workers first"])[0]), atol=2e-3
    )


def test_a_page_in_whose_embedding_fails_leaves_the_vector_for_the_backfill(
    api, settings, tmp_path, frame, fake_embedder
):
    settings.CONTEXTOPS_RESOURCE_ROOTS = [str(tmp_path)]
    (tmp_path / "notes.md").write_text("Loaded text")
    handle = handle_add(frame=frame, kind="document", ref="file:notes.md", state="cold")
    fake_embedder.failing = True
    assert api.post(f"/handles/{handle.id}/page-in?mode=full").status_code == 200
    handle.refresh_from_db()
    # The vector of the ref no longer says what the handle holds: NULL until the backfill.
    assert handle.content == "Loaded text" and handle.embedding is None


def test_a_failing_provider_never_loses_the_handle(api, frame, fake_embedder, caplog):
    fake_embedder.failing = True
    with caplog.at_level(logging.WARNING, logger="contextops.embeddings"):
        response = api.post(
            f"/frames/{frame.id}/handles", {"kind": "message", "content": "Kept without a vector"}
        )
    assert response.status_code == 201, response.content
    handle = ContextHandle.objects.get(pk=response.json()["id"])
    assert handle.content == "Kept without a vector" and handle.embedding is None
    assert "provider is down" in caplog.text


def test_no_vector_is_stored_when_embeddings_are_off(frame, settings):
    settings.CONTEXTOPS_EMBEDDINGS = "none"
    handle = handle_add(frame=frame, kind="message", content="Plain")
    assert ContextHandle.objects.get(pk=handle.pk).embedding is None
