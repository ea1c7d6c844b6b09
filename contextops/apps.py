from django.apps import AppConfig


class ContextopsConfig(AppConfig):
    name = "contextops"
    verbose_name = "Tenancy"

    def ready(self) -> None:
        # Connects the login signals to the audit log (contextops.logins).
        from . import logins  # noqa: F401
