"""Where a person finds a LangGraph thread: the session page and the sessions list."""

from frames.graphs.models import GraphThread
from frames.services.sessions import session_create
from tests.graphs.test_api_graphs import put_body


def _thread(api, thread_id="t-1") -> GraphThread:
    response = api.post("/langgraph/checkpoints", put_body(thread_id=thread_id))
    assert response.status_code == 201, response.content
    return GraphThread.objects.get(thread_id=thread_id)


def test_the_session_page_links_its_thread_and_says_it_holds_one(api, member_client):
    thread = _thread(api)
    page = member_client.get(f"/sessions/{thread.session_id}/").content.decode()
    link = f'href="/langgraph/{thread.pk}/"'
    header = page[: page.index('class="toolbar session-data"')]
    assert link in header and "<code>t-1</code>" in header
    tree = page[page.index('id="frame-tree"') :]
    tree = tree[: tree.index("</ul>")]
    assert "This session holds a LangGraph thread" in tree and link in tree
    assert "No frames yet" not in tree
    assert "Active" in page and 'aria-current="step">Active' in page


def test_a_session_without_a_thread_says_how_frames_come(api, member_client):
    session = session_create(organization=api.organization, agent=api.agent)
    page = member_client.get(f"/sessions/{session.pk}/").content.decode()
    assert "No frames yet" in page and "/langgraph/" not in page


def test_the_sessions_list_links_the_thread_of_a_row(api, member_client):
    thread = _thread(api)
    plain = session_create(organization=api.organization, agent=api.agent, title="Plain")
    page = member_client.get("/").content.decode()
    rows = page[page.index("<tbody>") :]
    graph_row = rows[rows.index(f"/sessions/{thread.session_id}/") :]
    graph_row = graph_row[: graph_row.index("</tr>")]
    assert f'href="/langgraph/{thread.pk}/">LangGraph thread</a>' in graph_row
    plain_row = rows[rows.index(f"/sessions/{plain.pk}/") :]
    assert "/langgraph/" not in plain_row[: plain_row.index("</tr>")]


def test_the_thread_page_says_where_it_is(api, member_client):
    thread = _thread(api)
    page = member_client.get(f"/langgraph/{thread.pk}/").content.decode()
    crumbs = page[page.index('class="breadcrumbs"') :]
    crumbs = crumbs[: crumbs.index("</nav>")]
    assert 'href="/">Sessions</a>' in crumbs
    assert f'href="/sessions/{thread.session_id}/">LangGraph thread t-1</a>' in crumbs
    assert crumbs.endswith("› LangGraph thread t-1")
