from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from django.contrib import admin
from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db.models import CASCADE, ForeignKey, ManyToManyField, Model, QuerySet
from django.db.models.signals import post_save
from django.dispatch import receiver
from django.forms import ModelChoiceField, ModelMultipleChoiceField
from django.http import Http404, HttpRequest
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers

from .audit import audit_record
from .models import Agent, ApiKey, AuditEntry, Member, Organization

if TYPE_CHECKING:  # generic in django-stubs only: subscripted, the classes fail at runtime
    from django.contrib.admin.options import _ListFilterT
    from django.utils.datastructures import _ListOrTuple

    ModelAdmin = admin.ModelAdmin[Any]
    TabularInline = admin.TabularInline[Any, Any]
else:
    ModelAdmin = admin.ModelAdmin
    TabularInline = admin.TabularInline

ADMIN_ACTIONS = {
    ADDITION: AuditEntry.Action.ADMIN_ADDED,
    CHANGE: AuditEntry.Action.ADMIN_CHANGED,
    DELETION: AuditEntry.Action.ADMIN_DELETED,
}


@receiver(post_save, sender=LogEntry, dispatch_uid="contextops_audit_admin")
def _admin_logged(sender: type[LogEntry], instance: LogEntry, created: bool, **kwargs: Any) -> None:
    """Every add, change and delete in the admin (policy facts among them) is audited,
    with what the admin's own change message says was changed."""
    if not created:
        return
    model = instance.content_type.model_class() if instance.content_type else None
    label = model._meta.label_lower if model is not None else "unknown"
    audit_record(
        action=ADMIN_ACTIONS.get(instance.action_flag, AuditEntry.Action.ADMIN_CHANGED),
        user=instance.user,
        target=f"{label} {instance.object_id}",
        detail={
            "model": label,
            "object_id": instance.object_id,
            "object": instance.object_repr,
            "change": instance.get_change_message(),
        },
    )


def admin_user(request: HttpRequest) -> User:
    """The user of an admin page: the admin site lets in signed-in staff only."""
    return cast(User, request.user)


def admin_organization(request: HttpRequest) -> Organization | None:
    """The organization whose rows a staff user administers; None for a superuser, who
    administers every organization. A staff user who is no member administers none: an
    unsaved ``Organization()``, without a pk."""
    user = admin_user(request)
    if user.is_superuser:
        return None
    if not hasattr(request, "_admin_organization"):
        member = Member.objects.filter(user=user).select_related("organization").first()
        request._admin_organization = member.organization if member else Organization()  # type: ignore[attr-defined]
    organization: Organization = request._admin_organization  # type: ignore[attr-defined]
    return organization


class OrganizationScopedAdmin(ModelAdmin):
    """An admin of organization-owned rows. An organization's admin (staff, not superuser)
    sees, picks and acts on its own organization's rows only; another organization's
    object answers 404, as if it did not exist. ``organization_path`` is the lookup from
    the model to its organization."""

    organization_path = "organization"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset = super().get_queryset(request)
        organization = admin_organization(request)
        if organization is None:
            return queryset
        if organization.pk is None:
            return queryset.none()  # filtering on None would match rows of no organization
        return queryset.filter(**{self.organization_path: organization.pk})

    def get_object(
        self, request: HttpRequest, object_id: str, from_field: str | None = None
    ) -> Model | None:
        obj = super().get_object(request, object_id, from_field)
        if obj is None and admin_organization(request) is not None:
            raise Http404  # not "does not exist, perhaps deleted": it is someone else's
        return obj

    def get_list_filter(self, request: HttpRequest) -> _ListOrTuple[_ListFilterT]:
        filters = super().get_list_filter(request)
        if admin_organization(request) is None:
            return filters
        # Filtering by organization would list every organization's name.
        return [f for f in filters if f != self.organization_path]

    def formfield_for_foreignkey(
        self, db_field: ForeignKey[Any, Any], request: HttpRequest, **kwargs: Any
    ) -> ModelChoiceField[Any] | None:
        organization = admin_organization(request)
        if organization is not None:
            kwargs["queryset"] = self._choices(db_field.related_model, request, organization)
            if db_field.related_model is Organization:
                # The organization of what its admin creates is theirs, whatever is posted.
                kwargs.update(initial=organization.pk, disabled=True)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def formfield_for_manytomany(
        self, db_field: ManyToManyField[Any, Any], request: HttpRequest, **kwargs: Any
    ) -> ModelMultipleChoiceField[Any] | None:
        organization = admin_organization(request)
        if organization is not None:
            kwargs["queryset"] = self._choices(db_field.related_model, request, organization)
        return super().formfield_for_manytomany(db_field, request, **kwargs)

    def _choices(
        self, model: type[Model], request: HttpRequest, organization: Organization
    ) -> QuerySet[Any]:
        """The rows of ``model`` an organization's admin may point at: its organization's."""
        if model is get_user_model():
            users = model._default_manager.filter(member__organization=organization.pk)
            return users if organization.pk is not None else users.none()
        model_admin = self.admin_site._registry.get(model)
        if isinstance(model_admin, OrganizationScopedAdmin):
            return model_admin.get_queryset(request)
        return model._default_manager.none()


@admin.register(Organization)
class OrganizationAdmin(OrganizationScopedAdmin):
    organization_path = "pk"
    list_display = ["name", "slug", "created_at"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}


class ApiKeyInline(TabularInline):
    model = ApiKey
    extra = 0
    fields = ["prefix", "label", "scope", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["prefix", "scope", "created_at", "last_used_at"]
    can_delete = False


@admin.register(Agent)
class AgentAdmin(OrganizationScopedAdmin):
    list_display = ["name", "organization", "authority", "department", "created_at"]
    list_filter = ["organization", "authority"]
    search_fields = ["name", "department"]
    inlines = [ApiKeyInline]
    actions = ["issue_key"]

    def get_deleted_objects(
        self, objs: Sequence[Any] | QuerySet[Any], request: HttpRequest
    ) -> tuple[list[str], dict[str, int], set[str], list[str]]:
        """Deleting an agent takes its keys (and the resource maps it reported) with it: the
        right to delete the agent is the right to delete those, which no one deletes one by
        one (a key is revoked, and stays listed)."""
        deleted, counts, needed, protected = super().get_deleted_objects(objs, request)
        owned = {
            str(related.related_model._meta.verbose_name)
            for related in Agent._meta.related_objects
            if related.on_delete is CASCADE
        }
        return deleted, counts, {name for name in needed if name not in owned}, protected

    @admin.action(description="Issue a new API key (shown once)")
    def issue_key(self, request: HttpRequest, queryset: QuerySet[Agent]) -> TemplateResponse:
        """Issue one key per selected agent and show the secrets once, on a page of their
        own that no cache keeps: never in a message, which would carry it to the next page
        (and, with cookie storage, into a cookie anyone holding it can decode)."""
        issued = []
        user = admin_user(request)
        for agent in queryset:
            key, raw = ApiKey.issue(agent=agent, label=f"issued by {user}")
            audit_record(
                action=AuditEntry.Action.KEY_ISSUED,
                user=user,
                organization_id=agent.organization_id,
                target=f"api key {key.prefix}",
                detail={"agent": agent.name, "scope": key.scope},
            )
            issued.append((agent, raw))
        response = TemplateResponse(
            request,
            "admin/contextops/issued_keys.html",
            {
                **self.admin_site.each_context(request),
                "title": "New API keys",
                "issued": issued,
                "opts": self.model._meta,
            },
        )
        add_never_cache_headers(response)
        return response


@admin.register(ApiKey)
class ApiKeyAdmin(OrganizationScopedAdmin):
    organization_path = "agent__organization"
    list_display = [
        "prefix",
        "agent",
        "label",
        "scope",
        "created_at",
        "last_used_at",
        "revoked_at",
    ]
    list_filter = ["agent__organization", "scope"]
    # The scope is chosen when the key is issued (create_api_key --read-only) and never
    # widened afterwards: a read-only key handed out stays read-only.
    readonly_fields = ["prefix", "hashed_secret", "scope", "created_at", "last_used_at"]
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # keys are issued from the agent page, where the secret is shown once

    @admin.action(description="Revoke selected keys")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        keys = list(queryset.filter(revoked_at__isnull=True).select_related("agent"))
        n = ApiKey.objects.filter(pk__in=[k.pk for k in keys]).update(revoked_at=timezone.now())
        for key in keys:
            audit_record(
                action=AuditEntry.Action.KEY_REVOKED,
                user=admin_user(request),
                organization_id=key.agent.organization_id,
                target=f"api key {key.prefix}",
                detail={"agent": key.agent.name},
            )
        self.message_user(request, f"Revoked {n} key(s).")


@admin.register(Member)
class MemberAdmin(OrganizationScopedAdmin):
    list_display = ["user", "organization"]
    list_filter = ["organization"]


class ReadOnlyAdmin(OrganizationScopedAdmin):
    """Rows to read only: nothing here adds, changes or deletes one (they are written by
    the product's own services, or are a log)."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    """The audit log, to read: nothing here adds, changes or deletes an entry."""

    list_display = ["created_at", "actor", "action", "target", "address", "organization"]
    list_filter = ["organization", "action"]
    search_fields = ["actor", "target", "address"]
    date_hierarchy = "created_at"
