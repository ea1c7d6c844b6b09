from django.apps import AppConfig


class ContextopsConfig(AppConfig):
    name = "contextops"
    verbose_name = "Tenancy"

    def ready(self) -> None:
        # Connects the login signals to the audit log (contextops.logins), and new
        # PostgreSQL connections to the quicker array dumper (contextops.postgres).
        # Our spans out to an OTLP collector (contextops.tracing), in the web and worker
        # processes alike, when an endpoint is configured.
        from . import logins, postgres, tracing  # noqa: F401

        if tracing.export_configured():
            tracing.tracing_setup()
