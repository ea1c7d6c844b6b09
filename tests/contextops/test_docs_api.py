"""docs/api.md lists every operation the API serves, with the summary the schema gives it."""

import re

from django.conf import settings

from contextops.api import api

ROW = re.compile(r"^\| `(GET|POST|PUT|DELETE|PATCH) ([^`]+)` \| (.+?) \|$", re.M)


def test_the_operation_table_of_docs_api_matches_the_schema():
    documented = set(ROW.findall((settings.BASE_DIR / "docs" / "api.md").read_text()))
    served = {
        (method.upper(), path.removeprefix("/api/v1"), operation.get("summary", ""))
        for path, operations in api.get_openapi_schema()["paths"].items()
        for method, operation in operations.items()
    }
    assert sorted(served - documented) == [], "operations missing from docs/api.md's table"
    assert sorted(documented - served) == [], "rows of docs/api.md's table the API does not serve"
