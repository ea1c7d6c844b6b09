"""The Django admin for turns, compaction runs and summaries (read and inspect)."""

from django.contrib import admin

from contextops.admin import OrganizationScopedAdmin

from .models import CompactionRun, Summary, Turn


@admin.register(Turn)
class TurnAdmin(OrganizationScopedAdmin):
    organization_path = "session__organization"
    list_display = (
        "session",
        "branch",
        "index",
        "tokens",
        "previous_error",
        "anchor_type",
        "summarized",
    )
    list_filter = ("anchor_type", "summarized", "truncated")
    raw_id_fields = ("session", "frame", "summary", "compaction_run")
    search_fields = ("user_message", "assistant_response")


@admin.register(CompactionRun)
class CompactionRunAdmin(OrganizationScopedAdmin):
    organization_path = "session__organization"
    list_display = (
        "id",
        "session",
        "strategy",
        "trigger",
        "status",
        "original_tokens",
        "final_tokens",
        "created_at",
    )
    list_filter = ("status", "strategy", "trigger")
    raw_id_fields = ("session", "summary")


@admin.register(Summary)
class SummaryAdmin(OrganizationScopedAdmin):
    organization_path = "session__organization"
    list_display = ("id", "session", "provider", "tokens", "failed", "created_at")
    raw_id_fields = ("session",)
