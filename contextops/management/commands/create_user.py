import getpass
import os
from argparse import ArgumentParser
from typing import Any

from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from contextops.errors import Conflict
from contextops.tenancy import user_create


class Command(BaseCommand):
    help = (
        "Create a dashboard user in an organization, or set an existing member's password. "
        "--approver and --admin grant rights; none is ever taken away here. "
        "Password from CONTEXTOPS_PASSWORD or a prompt."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--org", required=True)
        parser.add_argument("--username", required=True)
        parser.add_argument(
            "--approver", action="store_true", help="may approve and reject suspended frames"
        )
        parser.add_argument(
            "--admin",
            action="store_true",
            help="the organization's admin: the Django admin, showing this organization only "
            "(createsuperuser makes an installation's superuser)",
        )

    def handle(
        self, *args: Any, org: str, username: str, approver: bool, admin: bool, **options: Any
    ) -> None:
        password = os.environ.get("CONTEXTOPS_PASSWORD")
        if not password:
            password = getpass.getpass(f"Password for {username}: ")
            if password and getpass.getpass("The same password again: ") != password:
                raise CommandError("The two passwords differ; nothing was changed.")
        if not password:
            raise CommandError("A password is required (CONTEXTOPS_PASSWORD or the prompt).")
        try:
            # The rules of AUTH_PASSWORD_VALIDATORS, as the password change form applies them.
            validate_password(password)
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages) + " Nothing was changed.") from exc
        try:
            user_create(
                org_name=org, username=username, password=password, approver=approver, admin=admin
            )
        except Conflict as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"User {username} ready in {org}{' (approver)' if approver else ''}{' (admin)' if admin else ''}."
        )
