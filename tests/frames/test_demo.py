"""The demo `make run` loads: realistic, replayable, and every page of it opens."""

from django.core.management import call_command
from django.test import Client

from contextops.actors import agent_actor
from contextops.tenancy import api_key_create
from frames.conversation.models import CompactionRun, Summary, Turn
from frames.demo import _compacted_session
from frames.models import Event, Frame, Session, Usage
from frames.strategies import CONVERSATION, strategy_names


def test_it_builds_a_deep_tree_once_and_its_pages_open(db, capsys, tmp_path, settings):
    settings.VAR_DIR = tmp_path
    call_command("seed_demo")
    out = capsys.readouterr().out
    assert "Login:    demo / demo-password" in out
    call_command("seed_demo")
    assert "already there" in capsys.readouterr().out
    assert Session.objects.filter(organization__name="Demo").count() == 4

    session = Session.objects.get(title="Security review of the token-binding RFC")
    frames = Frame.objects.filter(session=session)
    assert frames.filter(depth=3).exists()
    assert frames.filter(status="active").exists() and frames.filter(status="completed").exists()
    call_command("rebuild_projections", "--verify")
    # Each session's model calls are its own agent's.
    for demo in Session.objects.filter(organization__name="Demo").select_related("agent"):
        actors = set(
            Event.objects.filter(session=demo, type="usage.recorded").values_list(
                "actor", flat=True
            )
        )
        assert actors == {agent_actor(demo.agent)}, (demo.title, actors)
        # No call began before its session did, nor before its frame was opened, and no
        # frame was opened before its parent.
        for call in Usage.objects.filter(session=demo).select_related("frame"):
            began = call.started_at or call.created_at
            assert began >= demo.started_at, (demo.title, began)
            assert began >= call.frame.created_at, (demo.title, call.frame.goal)
        for frame in Frame.objects.filter(session=demo, parent__isnull=False):
            assert frame.created_at >= frame.parent.created_at, frame.goal
        # The event log tells the story in order, from the session's start.
        times = list(
            Event.objects.filter(session=demo).order_by("seq").values_list("created_at", flat=True)
        )
        assert times == sorted(times) and times[0] >= demo.started_at, demo.title
        pushed = dict(
            Event.objects.filter(session=demo, type="frame.pushed").values_list(
                "frame_id", "created_at"
            )
        )
        for call in Usage.objects.filter(session=demo, started_at__isnull=False):
            assert pushed[call.frame_id] <= call.started_at, demo.title  # pushed, then called

    browser = Client()
    assert browser.login(username="demo", password="demo-password")
    assert "Security review" in browser.get("/").content.decode()
    assert browser.get(f"/sessions/{session.pk}/").status_code == 200
    for frame in frames:
        assert browser.get(f"/frames/{frame.pk}/").status_code == 200

    # Every section of the dashboard has something to show.
    page = browser.get(f"/sessions/{session.pk}/").content.decode()
    assert "state-" in page and "complete" in page  # the RLM state, done
    assert "Publishing a security summary" in browser.get("/inbox/").content.decode()
    assert "key_rotation_days_v2" in browser.get("/facts/").content.decode()
    lineage = browser.get("/facts/key_rotation_days_v2/lineage/").content.decode()
    assert "key_rotation_days_v1" in lineage and "jwks_overlap_days" in lineage
    turns = browser.get(f"/sessions/{session.pk}/turns/").content.decode()
    assert "Draft -07 moved" in turns
    packs = browser.get(f"/sessions/{session.pk}/context-packs/").content.decode()
    assert "key rotation token lifetime risks" in packs  # the pack the agent asked for


def test_its_compacted_session_shows_our_run_beside_the_strategies(db, tmp_path, settings):
    settings.VAR_DIR = tmp_path
    call_command("seed_demo")
    session = Session.objects.get(title="Fix the flaky checkout tests")
    # The window filled, the threshold trigger queued one run, and it ran: no run waits.
    run = CompactionRun.objects.get(session__organization__name="Demo")
    assert run.session == session
    assert (run.status, run.trigger, run.strategy, run.summarizer) == (
        "completed",
        "threshold",
        "anchor_point",
        "extractive",
    )
    assert (run.items_summarized, run.items_removed, run.preserved_anchor_index) == (7, 0, 7)
    assert run.final_tokens < run.original_tokens

    browser = Client()
    assert browser.login(username="demo", password="demo-password")
    page = browser.get(f"/sessions/{session.pk}/turns/counterfactual/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "The agent never compacted in this session" not in html
    assert "Compaction before call 12" in html  # calls 1 to 7 are turns 0 to 6
    assert (
        f"Our run found a conversation history of <strong>{run.original_tokens:,}</strong> "
        f"tokens and left <strong>{run.final_tokens:,}</strong>"
    ) in html
    assert (
        '<tr class="cf-actual"><th scope="row">our run: anchor_point (actual)</th><td>8–11</td><td>1–7</td>'
    ) in html
    for strategy in strategy_names(CONVERSATION):
        assert f'<th scope="row">{strategy}</th>' in html.split('class="card cf-compaction"')[1]
    turns = browser.get(f"/sessions/{session.pk}/turns/").content.decode()
    assert "<strong>Summary</strong> of turns 0–6" in turns and "7 turns folded" in turns


def test_its_compacted_session_comes_out_the_same_every_time(db):
    """No model, no clock, no randomness: two builds give the same turns, run and summary."""

    def build(org: str) -> tuple:
        key, _ = api_key_create(org_name=org, agent_name="coding-agent", issued_by="test")
        session = _compacted_session(key.agent.organization, key.agent)
        run = CompactionRun.objects.get(session=session)
        turns = Turn.objects.filter(session=session).order_by("index")
        return (
            list(turns.values_list("tokens", "occupancy_tokens", "anchor_type", "summarized")),
            (run.trigger, run.original_tokens, run.final_tokens, run.level, run.warning),
            Summary.objects.get(session=session).content,
        )

    assert build("First") == build("Second")
