"""/api/v1/docs renders every operation from our own static files, under our CSP."""

import json


def test_the_api_docs_render_every_operation(page):
    schema = json.loads(page.request.get("/api/v1/openapi.json").text())
    operations = sum(
        1
        for item in schema["paths"].values()
        for method in item
        if method in {"get", "post", "put", "patch", "delete"}
    )
    loaded: list[str] = []
    page.on("request", lambda request: loaded.append(request.url))

    page.goto("/api/v1/docs")
    page.wait_for_function(
        "n => document.querySelectorAll('.opblock').length === n", arg=operations
    )

    assert page.locator(".opblock").count() == operations > 40
    assert page.get_by_text("contextops API").first.is_visible()
    origin = page.url.split("/api/")[0]
    assert [url for url in loaded if not url.startswith(origin)] == []  # no CDN
    assert page.console_errors == []  # a blocked script or style would be logged here
