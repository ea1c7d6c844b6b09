from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from contextops.errors import DomainError
from contextops.models import Organization
from contextops.tenancy import api_key_create


class Command(BaseCommand):
    help = (
        "Create an API key for an agent (creating the organization and agent if needed). "
        "Prints the key alone on the last line. With --user, a person's own key: it may "
        "approve and reject suspensions when that user may (contextops approve TOKEN)."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--org", required=True)
        parser.add_argument(
            "--agent",
            default=None,
            help="the agent the key belongs to; required unless --user is given, whose "
            "personal key belongs to an agent named after the user",
        )
        parser.add_argument(
            "--authority",
            default=None,
            help="a level of the organization's ladder; without it a new agent gets employee "
            "(or the ladder's lowest level) and an existing agent keeps its own",
        )
        parser.add_argument("--department", default="")
        parser.add_argument(
            "--update-authority",
            action="store_true",
            help="move an existing agent (and all its keys) to --authority instead of refusing",
        )
        parser.add_argument(
            "--user",
            default=None,
            help="issue USERNAME's personal key (a dashboard user who is a member of --org)",
        )

        parser.add_argument(
            "--read-only",
            action="store_true",
            help="a key that may only read: every write it sends answers 403 read_only_key",
        )

    def handle(
        self,
        *args: Any,
        org: str,
        agent: str | None,
        authority: str | None,
        department: str,
        update_authority: bool,
        user: str | None,
        read_only: bool,
        **options: Any,
    ) -> None:
        agent_name = agent or user
        if not agent_name:
            raise CommandError("Name the key's agent with --agent (or a person with --user).")
        new_organization = not Organization.objects.filter(name=org).exists()
        try:
            key, raw = api_key_create(
                org_name=org,
                agent_name=agent_name,
                authority=authority,
                department=department,
                update_authority=update_authority,
                username=user,
                read_only=read_only,
            )
        except DomainError as exc:
            hint = (
                " Pass --update-authority to change it, or leave --authority out to keep it."
                if exc.code == "authority_differs"
                else ""
            )
            raise CommandError(exc.detail + hint) from exc
        person = f", personal key of {user!r}" if user else ""
        scope = ", read-only" if read_only else ""
        if new_organization:
            # A new organization has no members: no dashboard login sees its sessions yet.
            self.stderr.write(
                f"Created organization {org!r}: no dashboard user is a member of it yet, so "
                "the dashboard shows its sessions to nobody (manage.py create_user --org "
                f"{org} --username NAME adds one)."
            )
        self.stderr.write(
            f"Created key {key.prefix} for agent {agent_name!r} in {org!r} "
            f"(authority {key.agent.authority}{person}{scope}). It is shown once:"
        )
        self.stdout.write(raw)
