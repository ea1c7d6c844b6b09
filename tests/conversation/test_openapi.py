def test_the_conversation_endpoints_are_in_the_openapi_schema(api):
    response = api.client.get("/api/v1/openapi.json")
    assert response.status_code == 200
    paths = response.json()["paths"]
    for path in (
        "/api/v1/sessions/{session_id}/messages",
        "/api/v1/sessions/{session_id}/turns",
        "/api/v1/sessions/{session_id}/compactions",
        "/api/v1/compactions/{compaction_id}",
        "/api/v1/compactions/{compaction_id}/revert",
    ):
        assert path in paths
    assert "202" in paths["/api/v1/sessions/{session_id}/compactions"]["post"]["responses"]


def test_the_four_strategies_are_in_the_openapi_schema(api):
    schemas = api.client.get("/api/v1/openapi.json").json()["components"]["schemas"]
    assert schemas["CompactionIn"]["properties"]["strategy"]["enum"] == [
        "anchor_point",
        "priority_based",
        "summarize_oldest",
        "truncate_at",
    ]
    assert {"retries", "retry_at"} <= set(schemas["CompactionOut"]["properties"])
