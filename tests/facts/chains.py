"""A long supersession chain made straight with the ORM, each version holding for a day."""

import uuid
from datetime import datetime, timedelta

from facts.models import Fact


def valid_chain(organization, prefix: str, versions: int, start: datetime) -> list[Fact]:
    """``versions`` versions ``<prefix>_v1``… of one chain, the newest current; version
    ``i`` holds from ``start + i days`` for one day (the newest until now)."""
    chain = uuid.uuid4()
    facts = Fact.objects.bulk_create(
        Fact(
            organization=organization,
            key=f"{prefix}_v{i}",
            subject=prefix,
            value=i,
            chain=chain,
            version=i,
            is_valid=i == versions,
            status=Fact.Status.ACTIVE if i == versions else Fact.Status.SUPERSEDED,
            valid_from=start + timedelta(days=i),
            valid_until=None if i == versions else start + timedelta(days=i + 1),
        )
        for i in range(1, versions + 1)
    )
    for older, newer in zip(facts, facts[1:], strict=False):
        newer.supersedes = older
    Fact.objects.bulk_update(facts[1:], ["supersedes"], batch_size=500)
    return facts
