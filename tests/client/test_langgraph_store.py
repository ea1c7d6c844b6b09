"""ContextopsStore against the live server: LangGraph's store API over contextops facts."""

import asyncio

from contextops_client.langgraph import ContextopsStore, store_subject

from facts.models import Fact


def test_it_puts_gets_and_supersedes_so_the_lineage_holds_the_history(agent, ops):
    store = ContextopsStore(agent.url, agent.key, retries=1, backoff=0.01)
    store.put(("users", "ada"), "prefs", {"theme": "dark"})
    store.put(("users", "ada"), "prefs", {"theme": "light"})
    item = store.get(("users", "ada"), "prefs")
    assert item is not None
    assert (item.namespace, item.key, item.value) == (("users", "ada"), "prefs", {"theme": "light"})
    # Dated by the put that wrote it, the same on every read and in a search.
    written = Fact.objects.get(
        organization=agent.organization,
        subject=store_subject(("users", "ada"), "prefs"),
        is_valid=True,
    ).created_at
    written = written.replace(microsecond=written.microsecond // 1000 * 1000)  # as the API says
    assert item.updated_at == item.created_at == written
    assert store.get(("users", "ada"), "prefs").updated_at == written
    assert store.search(("users",))[0].updated_at == written
    subject = store_subject(("users", "ada"), "prefs")
    versions = Fact.objects.filter(organization=agent.organization, subject=subject)
    assert versions.count() == 2
    current = versions.get(is_valid=True)
    lineage = ops.fact_lineage(current.key)
    assert [v["value"] for v in lineage["chain"]] == [{"theme": "dark"}, {"theme": "light"}]
    assert store.get(("users", "grace"), "prefs") is None
    store.close()


def test_it_deletes_by_invalidating_the_current_version(agent):
    store = ContextopsStore(agent.url, agent.key, retries=1, backoff=0.01)
    store.put(("docs",), "a", {"n": 1})
    store.delete(("docs",), "a")
    assert store.get(("docs",), "a") is None
    assert Fact.objects.filter(subject=store_subject(("docs",), "a"), is_valid=True).count() == 0
    store.close()


def test_search_filters_by_namespace_prefix_and_value_fields(agent):
    store = ContextopsStore(agent.url, agent.key, retries=1, backoff=0.01)
    store.put(("tickets", "open"), "t1", {"status": "open", "priority": 3})
    store.put(("tickets", "open"), "t2", {"status": "open", "priority": 1})
    store.put(("tickets", "closed"), "t3", {"status": "closed", "priority": 3})
    store.put(("notes",), "n1", {"status": "open"})
    keys = lambda items: sorted(i.key for i in items)  # noqa: E731
    assert keys(store.search(("tickets",))) == ["t1", "t2", "t3"]
    assert keys(store.search(("tickets", "open"))) == ["t1", "t2"]
    assert keys(store.search(("tickets",), filter={"priority": 3})) == ["t1", "t3"]
    assert keys(store.search((), filter={"status": "open"})) == ["n1", "t1", "t2"]
    assert keys(store.search(("tickets",), filter={"priority": {"$gt": 1}})) == ["t1", "t3"]
    assert len(store.search(("tickets",), limit=2)) == 2
    assert store.list_namespaces(prefix=("tickets",)) == [
        ("tickets", "closed"),
        ("tickets", "open"),
    ]
    assert store.list_namespaces(max_depth=1) == [("notes",), ("tickets",)]
    store.close()


def test_the_async_store_and_another_organization(agent, make_agent):
    store = ContextopsStore(agent.url, agent.key, retries=1, backoff=0.01)

    async def run():
        await store.aput(("a",), "k", {"v": 1})
        got = await store.aget(("a",), "k")
        await store.aclose()
        return got

    assert asyncio.run(run()).value == {"v": 1}
    intruder = make_agent(org="Globex", agent="intruder")
    theirs = ContextopsStore(intruder.url, intruder.key, retries=1, backoff=0.01)
    assert theirs.get(("a",), "k") is None
    assert theirs.search(()) == []
    store.close()
    theirs.close()
