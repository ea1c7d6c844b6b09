"""Admin: RLM states are written through the protocol (the API and ``protocol``); the admin only shows them."""

from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest

from contextops.admin import OrganizationScopedAdmin

from .models import RlmState


@admin.register(RlmState)
class RlmStateAdmin(OrganizationScopedAdmin):
    list_display = [
        "state_id",
        "organization",
        "completion_status",
        "tree_id",
        "mutation_total",
        "created_at",
    ]
    list_filter = ["organization", "completion_status"]
    search_fields = ["state_id", "tree_id", "session_ref"]
    raw_id_fields = ["session", "frame", "root_frame"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False
