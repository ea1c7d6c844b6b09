from django.urls import path

from . import views

urlpatterns = [
    path("v1/traces", views.traces, name="otel_traces"),
    path("api/v1/otel/v1/traces", views.traces, name="otel_traces_api"),
]
