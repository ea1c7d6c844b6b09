"""A job the topology test's workers load (``celery worker --include tests.topology.jobs``).

It reads an RLM state through the product's own export (which loads large values from
the default storage) and writes what it read, with the name of the host that ran it, to
that same storage, where the test picks it up: the proof that a value written through a
web host is readable inside a worker on another host.
"""

import json
import os

from celery import shared_task
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from frames.rlm.interchange import state_export
from frames.rlm.models import RlmState


@shared_task(name="topology.rlm_state_read", acks_late=True, ignore_result=True)
def rlm_state_read(organization_id: int, state_id: str, result_name: str) -> str:
    state = RlmState.objects.get(organization_id=organization_id, state_id=state_id)
    document = {
        "host": os.environ.get("CONTEXTOPS_TOPOLOGY_HOST", ""),
        "export": state_export(state),
    }
    return default_storage.save(result_name, ContentFile(json.dumps(document).encode()))
