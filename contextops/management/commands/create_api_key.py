from django.core.management.base import BaseCommand

from contextops.tenancy import api_key_create


class Command(BaseCommand):
    help = "Create an API key for an agent (creating the organization and agent if needed). Prints the key alone on the last line."

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True)
        parser.add_argument("--agent", required=True)
        parser.add_argument("--authority", default="employee")
        parser.add_argument("--department", default="")

    def handle(self, *args, org, agent, authority, department, **options):
        key, raw = api_key_create(
            org_name=org, agent_name=agent, authority=authority, department=department
        )
        self.stderr.write(
            f"Created key {key.prefix} for agent {agent!r} in {org!r} (authority {authority}). It is shown once:"
        )
        self.stdout.write(raw)
