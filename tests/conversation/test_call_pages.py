"""The calls timeline on the session page and a call's own page with its anatomy."""

import pytest
from django.test import Client

from frames.conversation.importing import transcript_import
from frames.conversation.readers import read_transcript
from frames.models import Usage
from tests.conversation.test_anatomy import SPOTTER

pytestmark = pytest.mark.usefixtures("prices")


@pytest.fixture
def imported(api):
    return transcript_import(
        organization=api.organization, transcript=read_transcript(SPOTTER)
    ).session


def test_the_timeline_lists_calls_with_links_to_their_pages(member_client, imported):
    html = member_client.get(f"/sessions/{imported.pk}/calls/", HTTP_HX_REQUEST="true")
    text = html.content.decode()
    assert html.status_code == 200 and "<html" not in text
    first = Usage.objects.filter(session=imported).order_by("created_at", "id").first()
    assert f"/sessions/{imported.pk}/calls/{first.pk}/" in text


def test_a_call_page_shows_its_anatomy_and_collapses_long_content(member_client, imported):
    call = Usage.objects.filter(session=imported).order_by("-created_at", "-id").first()
    page = member_client.get(f"/sessions/{imported.pk}/calls/{call.pk}/")
    html = page.content.decode()
    assert page.status_code == 200
    assert 'class="anatomy-bar"' in html and "System prompt and tools" in html
    assert "Tool results" in html and "<details>" in html
    assert "{&#x27;" not in html  # no Python reprs: JSON is shown formatted


def test_another_organizations_call_page_is_404(make_user, imported):
    outsider = Client()
    outsider.force_login(make_user(username="globex", org="Globex"))
    call = Usage.objects.filter(session=imported).first()
    assert outsider.get(f"/sessions/{imported.pk}/calls/{call.pk}/").status_code == 404
    assert outsider.get(f"/sessions/{imported.pk}/calls/").status_code == 404
