from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest

from contextops.admin import ReadOnlyAdmin

from .models import ContextHandle, Event, Frame, ModelPrice, Session, Suspension, token_hash

# Sessions, frames, handles, events and suspensions are projections of the event log:
# they change through the API, never here.


@admin.register(Session)
class SessionAdmin(ReadOnlyAdmin):
    list_display = [
        "id",
        "title",
        "organization",
        "agent",
        "lifecycle_state",
        "pressure_level",
        "created_at",
    ]
    list_filter = ["organization", "lifecycle_state"]
    search_fields = ["id", "title"]
    readonly_fields = ["identity"]


@admin.register(Frame)
class FrameAdmin(ReadOnlyAdmin):
    list_display = ["id", "goal", "status", "depth", "budget_total", "budget_used", "session"]
    list_filter = ["status"]
    search_fields = ["goal"]
    raw_id_fields = ["session", "parent"]


@admin.register(ContextHandle)
class ContextHandleAdmin(ReadOnlyAdmin):
    organization_path = "session__organization"
    list_display = ["id", "kind", "priority", "state", "estimated_tokens", "frame"]
    raw_id_fields = ["frame", "session"]


@admin.register(Event)
class EventAdmin(ReadOnlyAdmin):
    organization_path = "session__organization"
    list_display = ["session", "seq", "type", "actor", "created_at"]
    raw_id_fields = ["session"]


@admin.register(Suspension)
class SuspensionAdmin(ReadOnlyAdmin):
    """Listed, never opened: a suspension's primary key is its token, the bearer secret
    that resumes the frame, so a page of its own would put the token in the address (and
    the access log) and on the page. The list shows the token's hash, as the event log
    and the dashboard's inbox do."""

    organization_path = "session__organization"
    list_display = ["frame", "status", "reason", "token_digest", "suspended_at", "expires_at"]
    list_display_links = None
    raw_id_fields = ["frame", "session"]

    @admin.display(description="token (SHA-256, first 12)")
    def token_digest(self, obj: Suspension) -> str:
        return token_hash(obj.token)[:12]

    def has_view_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return obj is None and super().has_view_permission(request)


@admin.register(ModelPrice)
class ModelPriceAdmin(admin.ModelAdmin):
    """Prices per million tokens, one table for the whole installation: superusers keep
    them current; an organization's admin reads them (the costs it sees come from here)
    and cannot change them. A model without a row
    has no price: its calls show "unknown model: no price"."""

    list_display = [
        "model",
        "provider",
        "input_per_mtok",
        "output_per_mtok",
        "cache_write_5m_per_mtok",
        "cache_write_1h_per_mtok",
        "cache_read_per_mtok",
        "updated_at",
    ]
    list_editable = [
        "input_per_mtok",
        "output_per_mtok",
        "cache_write_5m_per_mtok",
        "cache_write_1h_per_mtok",
        "cache_read_per_mtok",
    ]
    list_filter = ["provider"]
    search_fields = ["model"]
