"""A long supersession chain comes in pages: newest first page, a cursor to older ones,
the links and rules at a page's edges as in the whole chain, and a constant cost."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from facts.services import fact_write

VERSIONS = 60


@pytest.fixture
def chain(api):
    org = api.organization
    fact_write(organization=org, key="rate_v1", value=1, authority="employee", source="user")
    for i in range(2, VERSIONS + 1):
        fact_write(
            organization=org,
            key=f"rate_v{i}",
            value=i,
            supersedes=f"rate_v{i - 1}",
            authority="employee",
            source="user",
        )
    fact_write(
        organization=org,
        key="derived",
        value="x",
        depends_on=["rate_v3"],
        authority="employee",
        source="user",
    )
    return org


def test_it_pages_a_long_chain_from_the_newest_versions_back_to_the_root(api, chain):
    first = api.get("/facts/rate_v1/lineage", {"limit": 25}).json()
    assert first["total_versions"] == VERSIONS
    assert [v["key"] for v in first["chain"]] == [f"rate_v{i}" for i in range(36, 61)]
    assert first["chain"][0]["supersedes"] == "rate_v35"
    assert first["chain"][-1]["is_valid"] is True and first["older_before_version"] == 36
    assert [d["key"] for d in first["dependents"]] == ["derived"]  # of a version on no page yet

    seen = [v["key"] for v in first["chain"]]
    cursor = first["older_before_version"]
    while cursor is not None:
        page = api.get("/facts/rate_v1/lineage", {"limit": 25, "before_version": cursor}).json()
        assert page["chain"][-1]["superseded_by"] == seen[0]
        assert page["chain"][-1]["superseded_by_rule"] == "explicit"
        seen = [v["key"] for v in page["chain"]] + seen
        cursor = page["older_before_version"]
    assert seen == [f"rate_v{i}" for i in range(1, VERSIONS + 1)]
    assert page["chain"][0]["supersedes"] is None


def test_it_answers_a_short_chain_whole_as_before(api, chain):
    whole = api.get("/facts/rate_v2/lineage", {"limit": 500}).json()
    assert len(whole["chain"]) == VERSIONS and whole["older_before_version"] is None
    assert len(api.get("/facts/rate_v2/lineage").json()["chain"]) == VERSIONS  # under 100


@pytest.mark.parametrize(
    "params", [{"limit": 0}, {"limit": 501}, {"before_version": 0}, {"limit": "many"}]
)
def test_it_refuses_a_bad_page(api, chain, params):
    response = api.get("/facts/rate_v1/lineage", params)
    assert response.status_code == 422 and response.json()["error"] == "validation_error"


def test_it_reads_any_page_in_the_same_number_of_queries(api, chain):
    from facts.selectors.lineage import fact_lineage

    def count(**page):
        with CaptureQueriesContext(connection) as ctx:
            lineage = fact_lineage(organization=chain, key="rate_v1", limit=10, **page)
        assert len(lineage.chain) == 10
        return len(ctx.captured_queries)

    assert count(before_version=30) == count() + 1  # an older page also reads its newer edge


def test_it_pages_the_lineage_page_of_the_dashboard(member_client, api, chain):
    html = member_client.get("/facts/rate_v1/lineage/").content.decode()
    assert "60 versions" in html and "Older versions" not in html
    older = member_client.get("/facts/rate_v1/lineage/?before_version=30").content.decode()
    assert "Versions 1 to 29 of 60" in older and "Newest versions" in older
    assert "rate_v29" in older and "rate_v31" not in older
    assert member_client.get("/facts/rate_v1/lineage/?before_version=x").status_code == 200
