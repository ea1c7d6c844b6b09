from django.apps import AppConfig


class ContextopsConfig(AppConfig):
    name = "contextops"
    verbose_name = "Tenancy"

    def ready(self) -> None:
        # Connects the login signals to the audit log (contextops.logins), and new
        # PostgreSQL connections to the quicker array dumper (contextops.postgres).
        from . import logins, postgres  # noqa: F401
        from .tracing import export_configured, tracing_setup

        # Our spans out to an OTLP collector, in the web and worker processes alike.
        if export_configured():
            tracing_setup()
