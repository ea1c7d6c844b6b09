from django.urls import path

from . import views as context_views

app_name = "context"
urlpatterns = [
    path("sessions/<uuid:session_id>/pressure/", context_views.pressure_fragment, name="pressure"),
    path(
        "sessions/<uuid:session_id>/context-packs/",
        context_views.context_packs_fragment,
        name="packs",
    ),
    path(
        "sessions/<uuid:session_id>/context-packs/all/",
        context_views.context_packs_list_page,
        name="packs_all",
    ),
    path(
        "sessions/<uuid:session_id>/context-packs/diff/",
        context_views.context_pack_diff_page,
        name="packs_diff",
    ),
    path(
        "sessions/<uuid:session_id>/context-packs/<uuid:pack_id>/",
        context_views.context_pack_page,
        name="pack_detail",
    ),
    path(
        "sessions/<uuid:session_id>/context-preview/",
        context_views.context_preview_fragment,
        name="preview",
    ),
    path(
        "frames/<uuid:frame_id>/handles/",
        context_views.frame_handles_fragment,
        name="frame_handles",
    ),
    path(
        "handles/<uuid:handle_id>/page-in/",
        context_views.handle_page_in_action,
        name="handle_page_in",
    ),
    path(
        "handles/<uuid:handle_id>/page-out/",
        context_views.handle_page_out_action,
        name="handle_page_out",
    ),
]
