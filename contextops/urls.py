from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from . import dashboard, health
from .api import api

urlpatterns = [
    path("api/v1/", api.urls),
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("favicon.ico", dashboard.favicon, name="favicon"),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("audit/", dashboard.audit_log, name="audit_log"),
    path("", include("frames.urls")),
    path("", include("frames.suspensions.urls")),
    path("", include("frames.context.urls")),
    path("", include("facts.urls")),
    path("", include("frames.conversation.urls")),
    path("", include("frames.rlm.urls")),
    path("", include("frames.graphs.urls")),
    path("", include("frames.ownership.urls")),
    path("", include("frames.otel.urls")),
    path("", include("contextops.notifications.urls")),
]
