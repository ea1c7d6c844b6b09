from django.contrib import admin, messages
from django.utils import timezone

from .models import Agent, ApiKey, Member, Organization


@admin.register(Organization)
class OrganizationAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "created_at"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}


class ApiKeyInline(admin.TabularInline):
    model = ApiKey
    extra = 0
    fields = ["prefix", "label", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["prefix", "created_at", "last_used_at"]
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
        for agent in queryset:
            _, raw = ApiKey.issue(agent=agent, label=f"issued by {request.user}")
            self.message_user(
                request,
                f"Key for {agent.name}: {raw} (copy it now; it is not shown again)",
                messages.WARNING,
            )


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ["prefix", "agent", "label", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["agent__organization"]
    readonly_fields = ["prefix", "hashed_secret", "created_at", "last_used_at"]
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
