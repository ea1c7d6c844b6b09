"""``manage.py embeddings_backfill``: rows without a vector get one, in batches of one
provider call each, per organization if asked; ``--all`` embeds every row again; a
second run does nothing; a failing provider or a row changed meanwhile is left alone."""

import io
from datetime import timedelta

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from contextops.embeddings import embedder_override, vector_from_bytes, vector_to_bytes
from facts.models import Fact, WorkingSetItem
from facts.services import fact_write, working_set_put
from frames.models import ContextHandle
from frames.services.handles import handle_add
from frames.services.sessions import session_create
from frames.services.stack import frame_push
from tests.fakes.embeddings import WordsEmbedder

pytestmark = pytest.mark.django_db(transaction=True)


def backfill(*args: str) -> str:
    out = io.StringIO()
    call_command("embeddings_backfill", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def world(make_api, settings):
    """Two organizations' handles, facts and working-set items, written while embeddings
    were off: no row has a vector."""
    settings.CONTEXTOPS_EMBEDDINGS = "none"
    rows = {}
    for name in ("Acme", "Globex"):
        org = make_api(org=name, authority="admin").organization
        session = session_create(organization=org, identity={"user_name": "Ada"})
        frame = frame_push(session=session, goal="work", budget_total=10_000)
        handles = [
            handle_add(frame=frame, kind="message", content=f"{name} message {i}") for i in range(3)
        ]
        handles.append(handle_add(frame=frame, kind="document", ref=f"s3://{name}/doc"))
        fact_write(organization=org, key=f"{name}_city", value="Lyon", authority="admin")
        fact_write(organization=org, key=f"{name}_size", value={"desks": 4}, authority="admin")
        working_set_put(session=session, key="draft", value=f"{name} draft")
        rows[name] = (org, session, handles)
    settings.CONTEXTOPS_EMBEDDINGS = "wordllama"
    assert not ContextHandle.objects.filter(embedding__isnull=False).exists()
    assert not Fact.objects.filter(embedding__isnull=False).exists()
    return rows


def unit(vector):
    return vector / np.linalg.norm(vector)


def test_it_fills_every_missing_vector_and_does_nothing_the_second_time(world, fake_embedder):
    out = backfill()
    assert "handles: 8 embedded, 0 failed, 0 changed meanwhile (of 8 without a vector)" in out
    assert "facts: 4 embedded" in out and "working-set items: 2 embedded" in out
    for handle in ContextHandle.objects.all():
        assert np.allclose(
            vector_from_bytes(handle.embedding),
            unit(fake_embedder.embed([handle.embedding_text])[0]),
            atol=2e-3,
        )
    fact = Fact.objects.get(key="Acme_size")
    assert np.allclose(
        vector_from_bytes(fact.embedding),
        unit(fake_embedder.embed(['Acme_size: {"desks": 4}'])[0]),
        atol=2e-3,
    )
    item = WorkingSetItem.objects.get(session=world["Acme"][1])
    assert np.allclose(
        vector_from_bytes(item.embedding),
        unit(fake_embedder.embed(["draft: Acme draft"])[0]),
        atol=2e-3,
    )
    fake_embedder.calls.clear()
    again = backfill()
    assert "handles: 0 embedded, 0 failed, 0 changed meanwhile (of 0 without a vector)" in again
    assert fake_embedder.calls == []


def test_it_embeds_one_batch_per_provider_call(world, fake_embedder):
    backfill("--batch-size", "3")
    handle_calls = [
        c for c in fake_embedder.calls if any("message" in t or "s3://" in t for t in c)
    ]
    assert [len(c) for c in handle_calls] == [3, 3, 2]


def test_it_keeps_to_one_organization_when_asked(world, fake_embedder):
    out = backfill("--org", "Globex")
    assert "handles: 4 embedded" in out and "facts: 2 embedded" in out
    assert set(Fact.objects.filter(embedding__isnull=False).values_list("key", flat=True)) == {
        "Globex_city",
        "Globex_size",
    }
    assert not ContextHandle.objects.filter(
        session__organization__name="Acme", embedding__isnull=False
    ).exists()
    with pytest.raises(CommandError, match="No organization named 'Initech'"):
        backfill("--org", "Initech")


def test_all_embeds_every_row_again_after_a_provider_change(world, fake_embedder):
    backfill()
    other = WordsEmbedder(dim=8)
    with embedder_override(other):
        assert "handles: 0 embedded" in backfill()  # nothing missing
        out = backfill("--all")
    assert "handles: 8 embedded, 0 failed, 0 changed meanwhile (of 8 rows)" in out
    assert {len(h.embedding) for h in ContextHandle.objects.all()} == {16}  # 8 x float16


def test_a_failing_provider_leaves_the_rows_for_the_next_run(world, fake_embedder):
    fake_embedder.failing = True
    with pytest.raises(CommandError, match="14 row\\(s\\) could not be embedded"):
        backfill()
    assert not ContextHandle.objects.filter(embedding__isnull=False).exists()
    fake_embedder.failing = False
    assert "handles: 8 embedded" in backfill()


def test_a_row_whose_text_changed_meanwhile_keeps_the_writes_vector(world, fake_embedder):
    _, session, _ = world["Acme"]
    fresh = vector_to_bytes(np.ones(16, dtype=np.float32) / 4)

    def put_meanwhile():
        """A put of another value lands while the provider embeds the working set."""
        if fake_embedder.calls[-1] == ["draft: Acme draft"]:
            WorkingSetItem.objects.filter(session=session).update(
                value="rewritten", embedding=fresh, updated_at=timezone.now() + timedelta(days=1)
            )

    fake_embedder.during = put_meanwhile
    out = backfill("--org", "Acme")
    assert "working-set items: 0 embedded, 0 failed, 1 changed meanwhile" in out
    assert bytes(WorkingSetItem.objects.get(session=session).embedding) == fresh


def test_it_refuses_to_run_with_embeddings_off(world, settings):
    settings.CONTEXTOPS_EMBEDDINGS = "none"
    with pytest.raises(CommandError, match="Embeddings are off"):
        backfill()
    with pytest.raises(CommandError, match="--batch-size must be at least 1"):
        settings.CONTEXTOPS_EMBEDDINGS = "wordllama"
        backfill("--batch-size", "0")
