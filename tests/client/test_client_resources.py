"""Discovering, annotating and compacting through the client, against the live server."""

import pytest
from contextops_client import ContextPack, FrameCompaction, Handle, ValidationError

from .test_types import shape_errors

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.xdist_group("live")]


def test_it_discovers_annotates_and_compacts_with_the_shapes_it_declares(ops):
    session = ops.session(identity={"user_name": "Ada", "authority": "employee"})
    with ops.frame(session, goal="Read the runbook", budget=50_000) as frame:
        cold = ops.handle_add(frame, kind="document", ref="docs/runbook.md", state="cold")
        doc = ops.handle_add(frame, kind="document", content="Old notes. " * 200, priority="low")
        noted = ops.handle_annotate(doc, "Superseded by the runbook.")
        pack = frame.context_pack(budget_tokens=4_000)
        compacted = ops.frame_compact(frame, target_tokens=0, strategy="priority_based")
        with pytest.raises(ValidationError) as refused:
            ops.frame_compact(frame, target_tokens=0, strategy="magic")

    assert cold["state"] == "cold"
    assert [n["note"] for n in noted["notes"]] == ["Superseded by the runbook."]
    assert pack["resources"][0]["name"] == "docs/runbook.md" and pack["format"] == "verbose"
    assert compacted["removed"] == [doc["id"]] and compacted["final_tokens"] == 0
    assert "priority_based" in str(refused.value.body)
    errors = [
        *shape_errors(noted, Handle, "handle_annotate"),
        *shape_errors(pack, ContextPack, "context_pack"),
        *shape_errors(compacted, FrameCompaction, "frame_compact"),
    ]
    assert errors == []
