"""With the real facts app: superseded, hypothetical and draft facts never reach a pack."""


def _fact(api, **body):
    response = api.post("/facts", {"source": "user", **body})
    assert response.status_code == 201, response.content
    return response.json()


def test_it_packs_only_valid_facts_in_scope(api, session, frame):
    _fact(api, key="order_v1", subject="order", value="approved")
    _fact(api, key="order_v2", subject="order", value="cancelled", supersedes="order_v1")
    _fact(
        api,
        key="plan_hypo",
        subject="plan",
        value="hypothetical-plan",
        scope="hypothetical",
        scope_id="t1",
    )
    _fact(api, key="plan_draft", subject="plan", value="draft-plan", scope="draft", scope_id="t1")
    _fact(
        api,
        key="policy_discount",
        subject="discount",
        value="max 15%",
        source="policy",
        is_constraint=True,
        constraint_type="policy",
    )
    body = api.post(
        f"/sessions/{session.id}/context-pack", {"budget_tokens": 4000, "query": "order discount"}
    ).json()
    text = " ".join(f["text"] for f in body["facts"])
    keys = [f["key"] for f in body["facts"]]
    assert "cancelled" in text
    assert "approved" not in text
    assert "hypothetical-plan" not in text and "draft-plan" not in text
    assert "policy_discount" in keys
    assert keys.index("policy_discount") < keys.index("order_v2")
    assert body["token_summary"]["breakdown"]["facts"] == sum(f["tokens"] for f in body["facts"])


def test_a_pack_shows_a_reader_no_more_than_its_own_authority_may_read(
    make_api, make_session, make_frame
):
    manager = make_api(agent="manager", authority="manager")
    intern = make_api(agent="intern", authority="intern")
    _fact(
        manager, key="salary_band", subject="salary", value="Band C: 90k", read_authority="manager"
    )
    _fact(manager, key="office_hours", subject="hours", value="9 to 5")
    managers_session = make_session(identity={"user_name": "Mia", "authority": "manager"})
    make_frame(managers_session)

    def pack_text(api):
        response = api.post(
            f"/sessions/{managers_session.id}/context-pack",
            {"budget_tokens": 4000, "query": "salary hours"},
        )
        assert response.status_code == 200, response.content
        return " ".join(f["text"] for f in response.json()["facts"])

    # The same manager's session, asked for by an intern's key: the intern reads what
    # an intern may read, not what the session's owner may.
    assert "90k" not in pack_text(intern) and "9 to 5" in pack_text(intern)
    assert "90k" in pack_text(manager)


def test_organizational_policy_comes_first_for_the_subjects_it_governs(api, session, frame):
    _fact(api, key="travel_note_1", subject="booking", value="Travel to Lyon booked by train")
    _fact(api, key="travel_note_2", subject="budget", value="Travel budget for Lyon approved")
    _fact(
        api,
        key="travel_policy",
        subject="travel",
        value="Trains under four hours; no flights",
        source="hr_system",
        memory_type="organizational",
    )
    _fact(api, key="lunch_note", subject="lunch", value="Lunch travel travel Lyon Lyon")
    body = api.post(
        f"/sessions/{session.id}/context-pack", {"budget_tokens": 4000, "query": "travel Lyon"}
    ).json()
    keys = [f["key"] for f in body["facts"]]
    assert keys[0] == "travel_policy", keys
    assert {"travel_note_1", "travel_note_2", "lunch_note"} <= set(keys)


def test_assembly_counts_no_tokens_it_reads_them_from_storage(
    api, session, frame, make_handle, monkeypatch
):
    import tiktoken

    _fact(api, key="deadline", subject="deadline", value="Friday noon")
    _fact(api, key="limit", subject="spend", value={"max": 15, "unit": "%"}, is_constraint=True)
    for n in range(5):
        make_handle(frame, content=f"Evidence {n}: " + "words " * 200, tokens=210)
    api.put(f"/sessions/{session.id}/working-set/current_step", {"value": "drafting"})

    def refuse(*args, **kwargs):
        raise AssertionError("a context pack must not tokenize: counts come from storage")

    for name in ("encode", "encode_ordinary", "encode_batch", "encode_ordinary_batch"):
        monkeypatch.setattr(tiktoken.Encoding, name, refuse)
    for budget in (600, 2000, 20000):  # every compaction level's path, not only "none"
        response = api.post(
            f"/sessions/{session.id}/context-pack",
            {"budget_tokens": budget, "query": "deadline spend", "min_compaction": "none"},
        )
        assert response.status_code == 200, response.content
        body = response.json()
        assert body["token_summary"]["used"] <= budget
        assert any(f["key"] == "deadline" for f in body["facts"]) or budget == 600


def test_no_fact_is_left_out_while_the_budget_has_room(api, session, frame):
    """A small budget reads few facts of the ranking first; when all of them fit with room
    left, the pack reads deeper, so a fact is either in the pack or dropped for the budget,
    never silently absent."""
    for i in range(150):
        _fact(api, key=f"note_{i}", subject=f"topic {i}", value=f"short note {i}")
    roomy = api.post(f"/sessions/{session.id}/context-pack", {"budget_tokens": 2_000}).json()
    keys = {f["key"] for f in roomy["facts"]}
    assert len(keys) == 150, (len(keys), roomy["token_summary"])
    tight = api.post(f"/sessions/{session.id}/context-pack", {"budget_tokens": 600}).json()
    packed = {f["key"] for f in tight["facts"]}
    dropped = [d for d in tight["dropped"] if d["section"] == "facts"]
    assert 20 < len(packed) < 150 and dropped  # more than the first read, the rest dropped
    assert tight["token_summary"]["used"] <= 600


def test_a_fact_reads_back_as_written_whatever_its_json(api, session, frame):
    """The ranking hands over values unparsed and the pack parses those it takes: every
    JSON shape comes back as written, in ``value`` and in the text."""
    values = {
        "shape_text": "plain ünïcode text",
        "shape_number": 42.5,
        "shape_flag": True,
        "shape_list": ["read", 2, None],
        "shape_object": {"max": 15, "unit": "%", "nested": {"ok": [1]}},
        "shape_quoted": '{"looks": "like json"}',
    }
    for key, value in values.items():
        _fact(api, key=key, subject=f"{key} shapes", value=value)
    body = api.post(
        f"/sessions/{session.id}/context-pack", {"budget_tokens": 4000, "query": "shapes shape"}
    ).json()
    packed = {f["key"]: f for f in body["facts"] if f["key"] in values}
    assert {key: f["value"] for key, f in packed.items()} == values
    assert packed["shape_object"]["text"].startswith("shape_object: ")
    assert '"unit"' in packed["shape_object"]["text"] or "unit" in packed["shape_object"]["text"]
    assert packed["shape_quoted"]["text"] == 'shape_quoted: {"looks": "like json"}'
