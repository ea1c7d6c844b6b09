"""Admins edit facts here, but never in place: saving writes a new version that supersedes
the old one (author: the admin user, rule ``admin_edit``), and deleting is invalidation."""

from typing import Any, cast

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest

from contextops.actors import admin_actor
from contextops.admin import OrganizationScopedAdmin
from contextops.errors import AuthorityTooLow, DomainError
from contextops.models import Organization
from contextops.text import value_text

from . import services
from .models import Fact, SourceAuthority, WorkingSetItem

EDITABLE = [
    "subject",
    "value",
    "source",
    "observed_at",
    "is_constraint",
    "constraint_type",
    "constraint",
    "read_authority",
]


def admin_authority(user: Any, organization: Organization) -> str:
    """The level an admin user writes with: the top of the ladder for superusers and for
    holders of ``facts.edit_policy`` (an organization's admins), else admin."""
    ladder = organization.authority_ladder or ["policy"]
    if user.has_perm("facts.edit_policy") or "admin" not in ladder:
        return ladder[0]
    return "admin"


class _DryRun(Exception):
    pass


def _form_error(exc: DomainError) -> str:
    if isinstance(exc, AuthorityTooLow) and "proposal" in exc.extra:
        # The API keeps such a write as the writer's proposal; a form that refuses saves nothing.
        return (
            f"Your authority ranks below {exc.extra['fact_authority']}, which wrote "
            f"{exc.extra['fact_key']}: a lower authority never supersedes a higher one. "
            "Nothing was saved."
        )
    return exc.detail


class FactAdminForm(forms.ModelForm):
    value = forms.JSONField(help_text='Any JSON: a string needs quotes, e.g. "max 15%".')
    memory_type = forms.ChoiceField(
        choices=[("", "derive from the source"), *Fact.MemoryType.choices], required=False
    )
    request: HttpRequest | None = None  # set by FactAdmin.get_form

    class Meta:
        model = Fact
        fields = ["organization", "key", "scope", "scope_id", "memory_type", *EDITABLE]

    def write(self) -> services.FactWriteResult:
        """The service call behind this form: a new version when editing, a new fact when adding."""
        data = self.cleaned_data
        changes = {name: data[name] for name in EDITABLE if name in data}
        assert self.request is not None, "FactAdmin.get_form sets the request"
        user = self.request.user
        # The admin's own actor prefix (contextops.actors has agent, user and system only).
        author = admin_actor(user)
        if self.instance.pk:
            original = Fact.objects.select_related("organization").get(pk=self.instance.pk)
            return services.fact_admin_edit(
                fact=original,
                author=author,
                authority=admin_authority(user, original.organization),
                **changes,
            )
        return services.fact_write(
            organization=data["organization"],
            key=data["key"],
            authority=admin_authority(user, data["organization"]),
            author=author,
            scope=data.get("scope") or Fact.Scope.GLOBAL,
            scope_id=data.get("scope_id") or "",
            memory_type=data.get("memory_type") or "",
            **changes,
        )

    def clean(self):
        super().clean()
        data = self.cleaned_data
        if self.instance.pk and not self.instance.is_valid:
            raise ValidationError(
                f"{self.instance.key} is {self.instance.status}; only the current version of a chain can be edited."
            )
        if data.get("value") is None and "value" not in self.errors:
            self.add_error("value", "A fact needs a value.")
        if self.errors:
            return data
        # Run the write once and roll it back, so every rule's refusal shows on the form:
        # this savepoint is the form's validation (a dry run), not the write's transaction,
        # which the service owns when save_model runs it for real.
        try:
            with transaction.atomic():
                self.write()
                raise _DryRun
        except _DryRun:
            pass
        except DomainError as exc:
            raise ValidationError(_form_error(exc)) from exc
        return data


@admin.register(Fact)
class FactAdmin(OrganizationScopedAdmin):
    form = FactAdminForm
    list_display = [
        "key",
        "subject",
        "short_value",
        "authority",
        "scope",
        "status",
        "needs_review",
        "organization",
        "created_at",
    ]
    list_filter = [
        "organization",
        "status",
        "scope",
        "memory_type",
        "is_constraint",
        "needs_review",
    ]
    search_fields = ["key", "subject", "search_text"]
    actions = ["invalidate_selected"]
    readonly_fields = [
        "authority",
        "author",
        "status",
        "is_valid",
        "version",
        "chain",
        "supersedes",
        "supersession_rule",
        "needs_review",
        "tokens",
        "created_at",
    ]

    @admin.display(description="value")
    def short_value(self, fact: Fact) -> str:
        return value_text(fact.value)[:80]

    def get_readonly_fields(self, request: HttpRequest, obj: Fact | None = None) -> list[str]:
        fields = list(self.readonly_fields)
        if obj is not None:
            fields += ["organization", "key", "scope", "scope_id", "memory_type"]
        return fields

    def has_delete_permission(self, request: HttpRequest, obj: Fact | None = None) -> bool:
        return False  # invalidation instead: the lineage stays whole

    def get_form(
        self, request: HttpRequest, obj: Fact | None = None, change: bool = False, **kwargs: Any
    ) -> type[FactAdminForm]:
        # The admin makes the form class from ``form``: a subclass of FactAdminForm.
        form = cast("type[FactAdminForm]", super().get_form(request, obj, change=change, **kwargs))
        form.request = request
        return form

    def save_model(
        self, request: HttpRequest, obj: Fact, form: FactAdminForm, change: bool
    ) -> None:
        result = form.write()
        # The admin's messages and redirects now point at the version just written.
        saved = result.fact
        obj.pk, obj.key, obj.value = saved.pk, saved.key, saved.value
        if change and result.superseded is not None:
            messages.info(request, f"Saved as {saved.key}, superseding {result.superseded.key}.")

    def save_related(
        self, request: HttpRequest, form: FactAdminForm, formsets: Any, change: bool
    ) -> None:
        pass  # dependencies are written by the service

    @admin.action(description="Invalidate selected facts (they stay in their lineage)")
    def invalidate_selected(self, request: HttpRequest, queryset: QuerySet[Fact]) -> None:
        done = 0
        for fact in queryset.select_related("organization"):
            if not fact.is_valid:
                continue
            try:
                services.fact_invalidate(
                    organization=fact.organization,
                    key=fact.key,
                    authority=admin_authority(request.user, fact.organization),
                )
                done += 1
            except DomainError as exc:
                messages.error(request, f"{fact.key}: {exc.detail}")
        messages.success(request, f"Invalidated {done} fact(s).")


@admin.register(WorkingSetItem)
class WorkingSetItemAdmin(OrganizationScopedAdmin):
    organization_path = "session__organization"
    list_display = ["key", "session", "tokens", "expires_at", "updated_at"]
    raw_id_fields = ["session"]
    search_fields = ["key"]


class SourceAuthorityForm(forms.ModelForm):
    class Meta:
        model = SourceAuthority
        fields = ["organization", "source", "level"]

    def clean(self):
        super().clean()
        data = self.cleaned_data
        organization, level = data.get("organization"), data.get("level")
        if organization and level and level not in (organization.authority_ladder or []):
            self.add_error(
                "level",
                f"Not on {organization}'s ladder: {', '.join(organization.authority_ladder)}.",
            )
        return data


@admin.register(SourceAuthority)
class SourceAuthorityAdmin(OrganizationScopedAdmin):
    """Which level a named source (CFO, finance_system, ...) speaks with, per organization."""

    form = SourceAuthorityForm
    list_display = ["source", "level", "organization"]
    list_filter = ["organization"]
    search_fields = ["source"]
