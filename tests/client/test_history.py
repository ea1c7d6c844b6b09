"""The wrapper's bookkeeping without any server: turn grouping and the compacted history."""

from contextops_client.anthropic import SUMMARY_PREFIX, History, canonical, estimate_tokens


def _conversation():
    return [
        {"role": "user", "content": "Read the RFC"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "fetch", "input": {"u": 1}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Read it."}]},
        {"role": "user", "content": "Now the vendor notes"},
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": "Summarize"},
        {"role": "assistant", "content": "Summary."},
    ]


def _history(messages, start=0):
    history = History()
    history.next_turn = start
    history.extend(0, [canonical(m) for m in messages])
    return history


def test_it_groups_messages_into_turns_like_the_server():
    history = _history(_conversation(), start=3)
    assert history.turn_of == [3, 3, 3, 3, 4, 4, 5, 5]
    assert history.next_turn == 6


def test_it_replaces_removed_turns_with_the_summary_in_front_of_the_first_kept_question():
    messages = _conversation()
    history = _history(messages)
    history.removed_turns = frozenset({0})
    history.summary = "The RFC was read."
    extra = {"role": "user", "content": "And the incident?"}
    sent = history.compacted([*messages, extra], [canonical(m) for m in [*messages, extra]])
    assert sent[0]["content"][0] == {"type": "text", "text": SUMMARY_PREFIX + "The RFC was read."}
    assert sent[0]["content"][1]["text"] == "Now the vendor notes"
    assert sent[1:] == [*messages[5:], extra]


def test_it_leaves_a_diverged_history_alone_beyond_the_common_prefix():
    messages = _conversation()
    history = _history(messages)
    history.removed_turns = frozenset({0, 1})
    edited = [{"role": "user", "content": "A different start"}]
    assert history.compacted(edited, [canonical(m) for m in edited]) == edited


def test_it_compares_sdk_style_blocks_with_recorded_json():
    recorded = canonical(
        {"role": "assistant", "content": [{"type": "text", "text": "Hi", "citations": None}]}
    )
    assert recorded == canonical({"role": "assistant", "content": "Hi"})


def test_it_estimates_max_tokens_plus_a_quarter_of_the_text():
    call = {"max_tokens": 100, "messages": [{"role": "user", "content": "x" * 400}], "system": "s"}
    assert 200 <= estimate_tokens(call) <= 220
