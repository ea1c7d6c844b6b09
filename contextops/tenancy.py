"""Creating organizations, agents and users: shared by the management commands and the demo."""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import transaction
from django.utils.text import slugify

from .models import Agent, ApiKey, Member, Organization


def organization_get_or_create(*, name: str) -> Organization:
    org, _ = Organization.objects.get_or_create(
        name=name, defaults={"slug": slugify(name)[:120] or "org"}
    )
    return org


@transaction.atomic
def api_key_create(
    *, org_name: str, agent_name: str, authority: str = "employee", department: str = ""
) -> tuple[ApiKey, str]:
    """Create what does not exist yet (organization, agent) and issue a new key for the agent."""
    org = organization_get_or_create(name=org_name)
    agent, created = Agent.objects.get_or_create(
        organization=org,
        name=agent_name,
        defaults={"authority": authority, "department": department},
    )
    if not created and agent.authority != authority:
        agent.authority = authority
        agent.save(update_fields=["authority"])
    return ApiKey.issue(agent=agent)


@transaction.atomic
def user_create(
    *, org_name: str, username: str, password: str, approver: bool = False, admin: bool = False
):
    """Create or update a dashboard user in ``org_name``; approvers may decide suspensions."""
    org = organization_get_or_create(name=org_name)
    User = get_user_model()
    user, _ = User.objects.get_or_create(username=username)
    user.set_password(password)
    user.is_staff = admin
    user.is_superuser = admin
    user.save()
    Member.objects.update_or_create(user=user, defaults={"organization": org})
    if approver:
        user.user_permissions.add(
            Permission.objects.get(codename="approve_suspension", content_type__app_label="frames")
        )
    return user
