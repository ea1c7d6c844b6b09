"""The facts app: identity and authority, persistent facts and supersession, the working
set and the environment (the four state layers, docs/concepts.md#state-layers)."""

from django.apps import AppConfig


class FactsConfig(AppConfig):
    name = "facts"
    verbose_name = "Facts"
