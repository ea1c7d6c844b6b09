from django.apps import AppConfig


class ContextopsConfig(AppConfig):
    name = "contextops"
    verbose_name = "Tenancy"

    def ready(self) -> None:
        # Connects the login signals to the audit log (contextops.logins), and new
        # PostgreSQL connections to the quicker array dumper (contextops.postgres).
        from . import logins, postgres  # noqa: F401
