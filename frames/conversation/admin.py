"""The Django admin for turns, compaction runs and summaries (read and inspect)."""

from django.contrib import admin

from .models import CompactionRun, Summary, Turn


@admin.register(Turn)
class TurnAdmin(admin.ModelAdmin):
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
class CompactionRunAdmin(admin.ModelAdmin):
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
class SummaryAdmin(admin.ModelAdmin):
    list_display = ("id", "session", "provider", "tokens", "failed", "created_at")
    raw_id_fields = ("session",)
