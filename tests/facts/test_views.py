"""The facts dashboard: list with filters and pages, lineage with timeline and graph."""

import pytest
from django.test import Client

from contextops.models import AuditEntry
from facts.services import fact_write


@pytest.fixture
def org(member_client):
    from contextops.models import Organization

    return Organization.objects.get(name="Acme")


def w(org, key, value, **kw):
    kw.setdefault("authority", "employee")
    kw.setdefault("author", "agent:researcher")
    return fact_write(organization=org, key=key, value=value, source=kw.pop("source", "user"), **kw)


def test_it_lists_current_facts_by_default(member_client, org):
    w(org, "status_v1", "approved")
    w(org, "status_v2", "cancelled", supersedes="status_v1")
    response = member_client.get("/facts/")
    html = response.content.decode()
    assert response.status_code == 200
    assert "status_v2" in html and "cancelled" in html and ">status_v1<" not in html
    assert 'aria-current="page"' in html and "<html" in html
    everything = member_client.get("/facts/", {"validity": "all"}).content.decode()
    assert ">status_v1<" in everything and "superseded" in everything


def test_it_filters_by_scope_memory_type_subject_and_review(member_client, org):
    w(org, "rule", "max 5", source="policy", subject="cap")
    w(org, "guess", "maybe", scope="hypothetical", scope_id="t1")
    w(org, "base_v1", "1")
    w(org, "derived", "2", depends_on=["base_v1"])
    w(org, "base_v2", "3", supersedes="base_v1")
    get = lambda **params: member_client.get("/facts/", params).content.decode()  # noqa: E731
    assert "guess" in get(scope="hypothetical") and ">rule<" not in get(scope="hypothetical")
    assert ">rule<" in get(memory_type="organizational") and "guess" not in get(
        memory_type="organizational"
    )
    assert ">rule<" in get(subject="cap") and "derived" not in get(subject="cap")
    review = get(needs_review="1")
    assert "derived" in review and "needs review" in review and ">rule<" not in review
    assert "No facts match" in get(subject="nothing-here")


def test_it_answers_htmx_with_the_table_fragment_only(member_client, org):
    w(org, "k", "v")
    response = member_client.get("/facts/", {"scope": "global"}, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<section id="fact-table"')
    assert "<html" not in html and ">k<" in html


def test_it_pages_the_list(member_client, org):
    for i in range(30):
        w(org, f"item{i:02d}", i)
    first = member_client.get("/facts/").content.decode()
    assert "Page 1 of 2" in first and "item29" in first and "item00" not in first
    second = member_client.get("/facts/", {"page": 2}).content.decode()
    assert "item00" in second and "Page 2 of 2" in second


def test_it_escapes_html_in_a_fact_value(member_client, org):
    w(org, "xss_v1", "<script>alert('x')</script>")
    w(org, "xss_v2", "<b>bold</b>", supersedes="xss_v1")
    for url in ("/facts/", "/facts/?validity=all", "/facts/xss_v1/lineage/"):
        html = member_client.get(url).content.decode()
        assert "<script>alert" not in html and "<b>bold</b>" not in html
        assert "&lt;b&gt;bold&lt;/b&gt;" in html or "&lt;b&gt;bold" in html


def test_it_shows_the_lineage_timeline_and_graph(member_client, org):
    w(org, "address_v1", "123 Main St", author="agent:ada")
    w(
        org,
        "address_v2",
        "456 Oak Ave",
        supersedes="address_v1",
        authority="manager",
        author="agent:bob",
    )
    w(org, "shipping", "to 456 Oak Ave", depends_on=["address_v2"])
    w(org, "address_v3", "789 Pine Rd", supersedes="address_v2", authority="manager")
    w(org, "address_intern", "1 Fake St", subject="address", authority="intern")
    html = member_client.get("/facts/address_v1/lineage/").content.decode()
    assert "<svg" in html and "lineage-node head" in html and "needs-review" in html
    assert "456 Oak Ave" in html and "789 Pine Rd" in html
    assert "rule: explicit" in html and "agent:bob" in html and "manager" in html
    assert "fact-old" in html  # old value → new value
    assert "1 Fake St" in html and "proposal" in html
    assert "Mark reviewed" in html
    assert member_client.get("/facts/nope/lineage/").status_code == 404


def test_it_clears_needs_review_from_the_lineage_page(member_client, org):
    w(org, "base_v1", "1")
    w(org, "derived", "2", depends_on=["base_v1"])
    w(org, "base_v2", "3", supersedes="base_v1")
    response = member_client.post(
        "/facts/derived/review/", {"lineage": "base_v1"}, HTTP_HX_REQUEST="true"
    )
    html = response.content.decode()
    assert response.status_code == 200 and html.lstrip().startswith('<div id="lineage-body"')
    assert "Mark reviewed" not in html
    plain = member_client.post("/facts/derived/review/", {"lineage": "base_v1"})
    assert plain.status_code == 302 and plain["Location"] == "/facts/base_v1/lineage/"


def test_a_fact_needing_review_says_why_on_its_own_page_and_is_cleared_there(member_client, org):
    w(org, "base_v1", "1")
    w(org, "derived", "2 derived from base", depends_on=["base_v1"])
    w(org, "base_v2", "3", supersedes="base_v1")
    html = member_client.get("/facts/derived/lineage/").content.decode()
    card = html[html.index('id="review-derived"') :]
    card = card[: card.index("</section>")]
    assert "A fact it depends on changed" in card
    assert 'href="/facts/base_v1/lineage/">base_v1</a>' in card
    assert "2 derived from base" in card and 'action="/facts/derived/review/"' in card
    assert 'name="lineage" value="derived"' in card

    cleared = member_client.post(
        "/facts/derived/review/", {"lineage": "derived"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert 'id="review-derived"' not in cleared and "review-due" not in cleared
    again = member_client.get("/facts/derived/lineage/").content.decode()
    assert "review-due" not in again


def test_marking_a_fact_reviewed_is_audited_for_its_organization_only(
    member_client, org, audit_page
):
    w(org, "base_v1", "1")
    w(org, "derived", "2", depends_on=["base_v1"], subject="refund policy")
    w(org, "base_v2", "3", supersedes="base_v1")
    response = member_client.post(
        "/facts/derived/review/", {"lineage": "base_v1"}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200
    reviewed = AuditEntry.objects.filter(action=AuditEntry.Action.FACT_REVIEWED)
    entry = reviewed.get()
    assert (entry.user.username, entry.actor) == ("ada", "ada")
    assert entry.organization == org and entry.target == "fact derived"
    assert entry.detail == {"subject": "refund policy", "version": 1}
    member_client.post("/facts/derived/review/")  # nothing left to clear: nothing recorded
    assert reviewed.count() == 1
    assert "<td>fact derived</td>" in audit_page("Acme")
    assert "<td>fact derived</td>" not in audit_page("Globex")


def test_it_keeps_other_organizations_out(make_user, org):
    w(org, "acme_secret", "x")
    client = Client()
    client.force_login(make_user(username="eve", org="Globex"))
    assert "acme_secret" not in client.get("/facts/", {"validity": "all"}).content.decode()
    assert client.get("/facts/acme_secret/lineage/").status_code == 404
    assert client.post("/facts/acme_secret/review/").status_code == 404


def test_it_requires_login(client):
    response = client.get("/facts/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_fact_values_read_as_json_never_as_python(member_client, org):
    w(org, "light_v1", {"v": "green", "ok": True, "n": None})
    w(org, "light_v2", ["red", 2], supersedes="light_v1")
    listed = member_client.get("/facts/", {"validity": "all"}).content.decode()
    lineage = member_client.get("/facts/light_v2/lineage/").content.decode()
    for html in (listed, lineage):
        assert (
            "{&quot;n&quot;: null, &quot;ok&quot;: true, &quot;v&quot;: &quot;green&quot;}" in html
        )
        assert "[&quot;red&quot;, 2]" in html
        assert "&#x27;v&#x27;" not in html and "True" not in html and "None" not in html
