from django.apps import AppConfig


class ContextopsConfig(AppConfig):
    name = "contextops"
    verbose_name = "Tenancy"
