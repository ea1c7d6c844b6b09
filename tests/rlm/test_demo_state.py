"""The demo's RLM state sits on a frame of the demo's task tree and its page links to it."""

from django.test import Client

from frames.demo import DEMO_USER, demo_build
from frames.models import Frame
from frames.rlm.models import RlmState

PASSWORD = "pw-for-tests-1"


def test_the_demo_state_belongs_to_the_demo_tree_and_links_to_it(db):
    demo = demo_build(password=PASSWORD)
    state = RlmState.objects.get(organization=demo.organization)
    root = Frame.objects.get(session=demo.session, parent=None)
    assert state.session_id == demo.session.pk and state.frame.session_id == demo.session.pk
    assert state.root_frame_id == root.pk and state.tree_id == f"tree-{root.pk.hex[:8]}"
    assert state.frame.goal == "Read the RFC section by section" and state.is_complete

    browser = Client()
    assert browser.login(username=DEMO_USER, password=PASSWORD)
    page = browser.get(f"/rlm/{state.state_id}/").content.decode()
    assert "Task tree" in page and state.tree_id in page
    assert f'href="/sessions/{demo.session.pk}/#frame-{root.pk}"' in page
    tree = browser.get(f"/sessions/{demo.session.pk}/").content.decode()
    assert f'id="frame-{root.pk}"' in tree
