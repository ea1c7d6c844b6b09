from django.urls import path

from . import views

app_name = "frames"
urlpatterns = [
    path("", views.session_list, name="session_list"),
    path("usage/", views.usage, name="usage"),
    path("sessions/<uuid:session_id>/", views.session_detail, name="session_detail"),
    path("sessions/<uuid:session_id>/changes/", views.session_changes, name="session_changes"),
    path("sessions/<uuid:session_id>/at/", views.session_at, name="session_at"),
    path("sessions/<uuid:session_id>/calls/", views.session_calls, name="session_calls"),
    path("frames/<uuid:frame_id>/", views.frame_detail, name="frame_detail"),
    path("frames/<uuid:frame_id>/children/", views.frame_children, name="frame_children"),
]
