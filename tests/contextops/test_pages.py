"""Every list endpoint answers one page shape: items, the count of all, the next offset."""

import pytest

from contextops.api import api as ninja_api
from contextops.pages import page_body


@pytest.mark.parametrize(
    ("offset", "limit", "count", "next_offset"),
    [
        (0, 2, 3, 2),  # one item follows the page
        (0, 3, 3, None),  # the page ends exactly at the last item
        (2, 2, 3, None),  # the page runs past the last item
        (5, 2, 3, None),  # an offset past the end: an empty last page
        (0, 2, 0, None),  # nothing matches
    ],
)
def test_it_names_the_next_offset_only_when_an_item_follows(offset, limit, count, next_offset):
    items = list(range(count))[offset : offset + limit]
    body = page_body(iter(items), count=count, offset=offset, limit=limit)
    assert body == {"items": items, "count": count, "next_offset": next_offset}


def test_the_list_schemas_share_the_page_shape_under_their_own_names():
    schemas = ninja_api.get_openapi_schema()["components"]["schemas"]
    pages = ("SessionListOut", "FrameListOut", "CallListOut", "StateListOut", "FactListOut")
    for name in (*pages, "ConflictListOut"):
        assert set(schemas[name]["properties"]) == {"items", "count", "next_offset"}, name
        assert schemas[name]["required"] == ["items", "count", "next_offset"], name
