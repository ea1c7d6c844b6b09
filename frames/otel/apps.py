from django.apps import AppConfig


class OtelConfig(AppConfig):
    name = "frames.otel"
    label = "otel"
    verbose_name = "OpenTelemetry spans"
