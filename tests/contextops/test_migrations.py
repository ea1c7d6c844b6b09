"""Every model change ships with its migration (`make lint` and pre-commit check it too)."""

from io import StringIO

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_it_has_a_migration_for_every_model_change():
    out = StringIO()
    try:
        call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)
    except SystemExit:  # --check exits 1 when a migration is missing
        pytest.fail(f"A model changed without its migration:\n{out.getvalue()}")
