"""Turn grouping invariants over random conversations, sent in random batches (hypothesis)."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from frames.conversation.ingest import messages_append
from frames.conversation.models import Message, Turn
from tests.hypothesis_profiles import examples

texts = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=40)


@st.composite
def conversations(draw):
    """A list of messages where every tool_use is answered later, possibly out of order."""
    messages, pending = [], []
    for step in range(draw(st.integers(min_value=1, max_value=25))):
        kind = draw(st.sampled_from(["user", "assistant", "calls", "results"]))
        if kind == "user":
            messages.append({"role": "user", "content": draw(texts) or "hi"})
        elif kind == "assistant":
            messages.append(
                {"role": "assistant", "content": [{"type": "text", "text": draw(texts)}]}
            )
        elif kind == "calls":
            ids = [f"t{step}_{i}" for i in range(draw(st.integers(min_value=1, max_value=3)))]
            name = draw(st.sampled_from(["Edit", "Write", "Bash", "Read"]))
            messages.append(
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": i, "name": name, "input": {"file_path": "a.py"}}
                        for i in ids
                    ],
                }
            )
            pending += ids
        elif pending:
            answered = draw(st.lists(st.sampled_from(pending), min_size=1, unique=True))
            pending = [p for p in pending if p not in answered]
            blocks = [
                {
                    "type": "tool_result",
                    "tool_use_id": i,
                    "content": draw(st.sampled_from(["ok", "3 tests pass", "boom"])),
                    "is_error": draw(st.booleans()),
                }
                for i in answered
            ]
            messages.append({"role": "user", "content": blocks})
    if not messages:  # a conversation has at least one message; the API refuses an empty send
        messages.append({"role": "user", "content": "hi"})
    cuts = sorted(
        draw(st.sets(st.integers(min_value=1, max_value=max(1, len(messages) - 1)), max_size=4))
    )
    batches, start = [], 0
    for cut in [*cuts, len(messages)]:
        if cut > start:
            batches.append(messages[start:cut])
            start = cut
    return messages, batches


@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=conversations())
def test_grouping_invariants(make_session, data):
    messages, batches = data
    session = make_session(frame=False)
    for batch in batches:
        messages_append(session=session, messages=batch)
    turns = list(Turn.objects.filter(session=session).order_by("index"))
    assert [t.index for t in turns] == list(range(len(turns)))
    assert Message.objects.filter(session=session).count() == len(messages)
    assert sum(t.tokens for t in turns) == sum(
        m.tokens for m in Message.objects.filter(session=session)
    )
    owner = {call["id"]: t.index for t in turns for call in t.tool_calls}
    for turn in turns:
        for result in turn.tool_results:
            assert owner[result["tool_use_id"]] == turn.index  # a result joins its call's turn
    for before, after in zip(turns, turns[1:], strict=False):
        assert after.previous_error == before.has_error
        assert before.has_error == any(r["is_error"] for r in before.tool_results)
    user_texts = [m for m in messages if m["role"] == "user" and isinstance(m["content"], str)]
    assert len([t for t in turns if t.user_message]) <= len(user_texts)
