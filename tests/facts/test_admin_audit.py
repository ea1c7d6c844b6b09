"""An admin's edit of a policy fact is written to the audit log: who, from where, what."""

from django.test import Client

from contextops.models import AuditEntry
from facts.models import Fact
from facts.services import fact_write


def test_an_admin_edit_of_a_policy_fact_is_audited(api, make_user):
    policy = fact_write(
        organization=api.organization,
        key="discount_policy",
        value="max 15%",
        source="policy",
        authority="policy",
        is_constraint=True,
    ).fact
    admin = Client(REMOTE_ADDR="192.0.2.15")
    admin.force_login(make_user(username="root", admin=True))
    form = {
        "subject": policy.subject,
        "value": '"max 10%"',
        "source": policy.source,
        "observed_at_0": "",
        "observed_at_1": "",
        "is_constraint": "on",
        "constraint_type": policy.constraint_type,
        "constraint": "null",
        "read_authority": policy.read_authority,
    }
    response = admin.post(f"/admin/facts/fact/{policy.pk}/change/", form)
    assert response.status_code == 302, response.content.decode()[:2000]
    new = Fact.objects.get(supersedes=policy)
    entry = AuditEntry.objects.get(action=AuditEntry.Action.ADMIN_CHANGED)
    assert (entry.actor, entry.address) == ("root", "192.0.2.15")
    assert entry.organization == api.organization
    assert entry.detail["model"] == "facts.fact"
    assert entry.target in {f"facts.fact {policy.pk}", f"facts.fact {new.pk}"}
    assert "discount_policy" in entry.detail["object"]
    page = admin.get("/audit/").content.decode()
    assert "Changed in the admin" in page and "discount_policy" in page
