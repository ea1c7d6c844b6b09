from django.contrib import admin
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers

from .models import Agent, ApiKey, Member, Organization


@admin.register(Organization)
class OrganizationAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "created_at"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}


class ApiKeyInline(admin.TabularInline):
    model = ApiKey
    extra = 0
    fields = ["prefix", "label", "scope", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["prefix", "scope", "created_at", "last_used_at"]
    can_delete = False


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ["name", "organization", "authority", "department", "created_at"]
    list_filter = ["organization", "authority"]
    search_fields = ["name", "department"]
    inlines = [ApiKeyInline]
    actions = ["issue_key"]

    @admin.action(description="Issue a new API key (shown once)")
    def issue_key(self, request, queryset):
        """Issue one key per selected agent and show the secrets once, on a page of their
        own that no cache keeps: never in a message, which would carry it to the next page
        (and, with cookie storage, into a cookie anyone holding it can decode)."""
        issued = [
            (agent, ApiKey.issue(agent=agent, label=f"issued by {request.user}")[1])
            for agent in queryset
        ]
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
class ApiKeyAdmin(admin.ModelAdmin):
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

    def has_add_permission(self, request):
        return False  # keys are issued from the agent page, where the secret is shown once

    @admin.action(description="Revoke selected keys")
    def revoke(self, request, queryset):
        n = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"Revoked {n} key(s).")


@admin.register(Member)
class MemberAdmin(admin.ModelAdmin):
    list_display = ["user", "organization"]
    list_filter = ["organization"]
