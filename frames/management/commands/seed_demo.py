"""Load the demo organization, its sessions and a dashboard login (idempotent)."""

import os

from django.conf import settings
from django.core.management.base import BaseCommand

from frames.demo import DEMO_USER, demo_build


class Command(BaseCommand):
    help = "Create the demo organization with a realistic session, a login and an API key."

    def handle(self, *args, **options):
        password = os.environ.get("CONTEXTOPS_DEMO_PASSWORD", "demo-password")
        demo = demo_build(password=password)
        key_file = settings.VAR_DIR / "demo-api-key.txt"
        key_file.parent.mkdir(parents=True, exist_ok=True)
        key_file.write_text(demo.api_key + "\n")
        key_file.chmod(0o600)
        state = "created" if demo.created else "already there; left as it was"
        self.stdout.write(f"Demo organization “{demo.organization.name}”: {state}.")
        self.stdout.write(f"  Session:  /sessions/{demo.session.pk}/")
        self.stdout.write(f"  Login:    {DEMO_USER} / {password}")
        self.stdout.write(f"  API key:  {demo.api_key}  (also in {key_file})")
