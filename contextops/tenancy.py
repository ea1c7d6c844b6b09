"""Creating organizations, agents and users: shared by the management commands and the demo."""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission, User
from django.db import transaction
from django.db.models import Q
from django.utils.text import slugify

from .audit import audit_record
from .errors import Conflict, Invalid
from .models import DEFAULT_AUTHORITY_LADDER, Agent, ApiKey, AuditEntry, Member, Organization


def organization_get_or_create(*, name: str) -> Organization:
    org, _ = Organization.objects.get_or_create(
        name=name, defaults={"slug": slugify(name)[:120] or "org"}
    )
    return org


@transaction.atomic
def api_key_create(
    *,
    org_name: str,
    agent_name: str,
    authority: str | None = None,
    department: str = "",
    update_authority: bool = False,
    username: str | None = None,
    read_only: bool = False,
    issued_by: str = "manage.py create_api_key",
) -> tuple[ApiKey, str]:
    """Create what does not exist yet (organization, agent) and issue a new key for the agent.

    ``authority`` must be on the organization's ladder (422 ``validation_error``). A new
    agent gets it; when None, ``employee`` (or the ladder's lowest level if it has no
    employee). An existing agent keeps its own level: None or the same level just issues
    the key, another level is a 409 ``authority_differs`` unless ``update_authority`` is
    set, which moves the agent, and with it every key it holds.

    With ``username`` the key is that dashboard user's personal key (it may decide
    suspensions when the user may): the user must be a member of the organization
    (422 ``validation_error`` naming ``user`` otherwise). Nothing is created when it
    refuses.

    With ``read_only`` the key may only read: its writes answer 403 ``read_only_key``.
    """
    org = organization_get_or_create(name=org_name)
    user = _member_user(org, username) if username is not None else None
    ladder = org.authority_ladder or DEFAULT_AUTHORITY_LADDER
    if authority is not None and authority not in ladder:
        raise Invalid(
            f"Unknown authority {authority!r}; {org.name}'s ladder is {', '.join(ladder)}.",
            field="authority",
        )
    default = "employee" if "employee" in ladder else ladder[-1]
    agent, created = Agent.objects.get_or_create(
        organization=org,
        name=agent_name,
        defaults={"authority": authority or default, "department": department},
    )
    if not created and authority is not None and agent.authority != authority:
        if not update_authority:
            raise Conflict(
                "authority_differs",
                f"Agent {agent_name!r} of {org.name} already has authority {agent.authority}, "
                f"not {authority}; changing it changes what all of its keys may do.",
                authority=agent.authority,
            )
        agent.authority = authority
        agent.save(update_fields=["authority"])
    scope = ApiKey.Scope.READ_ONLY if read_only else ApiKey.Scope.FULL
    key, raw = ApiKey.issue(agent=agent, user=user, scope=scope)
    audit_record(
        action=AuditEntry.Action.KEY_ISSUED,
        actor=issued_by,
        organization_id=org.pk,
        target=f"api key {key.prefix}",
        detail={"agent": agent.name, "scope": scope, "personal_key_of": username or ""},
    )
    return key, raw


def _member_user(org: Organization, username: str) -> User:
    """The user named ``username`` if they are a member of ``org``; Invalid otherwise."""
    user = User.objects.filter(username=username).first()
    member = Member.objects.filter(user=user).first() if user is not None else None
    if user is None or member is None or member.organization_id != org.pk:
        raise Invalid(
            f"{org.name} has no member named {username!r}; a personal key is issued to a "
            "dashboard user of its own organization (create_user --org).",
            field="user",
        )
    return user


# What an organization's admin does in the Django admin, always within its organization
# (contextops.admin.OrganizationScopedAdmin): edit policy facts, the working set and which
# level a source speaks with; manage agents and their keys (deleting an agent deletes its
# keys; its sessions stay, without an agent); read sessions and what they hold, the audit
# log and the members. Model prices are the installation's: superusers'.
ORGANIZATION_ADMIN_PERMISSIONS = {
    "facts": [
        "view_fact",
        "add_fact",
        "change_fact",
        "edit_policy",
        "view_workingsetitem",
        "add_workingsetitem",
        "change_workingsetitem",
        "delete_workingsetitem",
        "view_sourceauthority",
        "add_sourceauthority",
        "change_sourceauthority",
        "delete_sourceauthority",
    ],
    "contextops": [
        "view_organization",
        "view_agent",
        "add_agent",
        "change_agent",
        "delete_agent",
        "view_apikey",
        "change_apikey",
        "view_member",
        "view_auditentry",
    ],
    "frames": [
        "view_session",
        "view_frame",
        "view_contexthandle",
        "view_event",
        "view_suspension",
        "view_modelprice",  # the prices its costs come from, read only
    ],
    "conversation": ["view_turn", "view_compactionrun", "view_summary"],
    "notifications": [
        "view_destination",
        "add_destination",
        "change_destination",
        "delete_destination",
        "view_delivery",
    ],
    "rlm": ["view_rlmstate"],
}


def _organization_admin_permissions() -> list[Permission]:
    wanted = Q()
    for app_label, codenames in ORGANIZATION_ADMIN_PERMISSIONS.items():
        wanted |= Q(content_type__app_label=app_label, codename__in=codenames)
    permissions = list(Permission.objects.filter(wanted))
    expected = sum(len(codenames) for codenames in ORGANIZATION_ADMIN_PERMISSIONS.values())
    assert len(permissions) == expected, "every permission named exists once migrate has run"
    return permissions


@transaction.atomic
def user_create(
    *, org_name: str, username: str, password: str, approver: bool = False, admin: bool = False
) -> User:
    """Create a dashboard user in ``org_name``, or set an existing member's password.

    Rights are only ever granted here (approver: may decide suspensions; admin: the
    organization's admin, staff in the Django admin with ORGANIZATION_ADMIN_PERMISSIONS,
    which shows it this organization's rows only; never a superuser, who sees every
    organization: ``createsuperuser`` makes those); taking one away is done in the admin,
    on purpose. A user of another
    organization is refused, never moved: that would hand them this one's data.
    """
    org = organization_get_or_create(name=org_name)
    User = get_user_model()
    user, _ = User.objects.get_or_create(username=username)
    member = Member.objects.filter(user=user).select_related("organization").first()
    if member is not None and member.organization_id != org.pk:
        raise Conflict(
            "user_in_another_organization",
            f"{username} belongs to {member.organization.name}; a user is never moved "
            "between organizations.",
        )
    user.set_password(password)
    if admin:
        user.is_staff = True
    user.save()
    if member is None:
        Member.objects.create(user=user, organization=org)
    if admin:
        user.user_permissions.add(*_organization_admin_permissions())
    if approver:
        user.user_permissions.add(
            Permission.objects.get(codename="approve_suspension", content_type__app_label="frames")
        )
    return user
