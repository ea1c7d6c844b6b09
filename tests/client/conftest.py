"""The client against the real server: pytest-django's live server, a fresh key per test."""

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from contextops_client import AsyncClient, Client

from contextops.tenancy import api_key_create


@dataclass
class Agent:
    url: str
    key: str
    organization: object
    agent: object


@pytest.fixture
def make_agent(live_server):
    """Factory: a new API key in ``org`` (the live server's database) and where to use it."""

    def make(org: str = "Acme", agent: str = "client-tests", authority: str = "employee") -> Agent:
        key, raw = api_key_create(org_name=org, agent_name=agent, authority=authority)
        return Agent(
            url=live_server.url, key=raw, organization=key.agent.organization, agent=key.agent
        )

    return make


@pytest.fixture
def agent(make_agent) -> Agent:
    return make_agent()


@pytest.fixture
def ops(agent) -> Iterator[Client]:
    client = Client(agent.url, agent.key, retries=1, backoff=0.01)
    yield client
    client.close()


@pytest.fixture
def aops(agent) -> AsyncClient:
    return AsyncClient(agent.url, agent.key, retries=1, backoff=0.01)
