"""The facts app: identity and authority, persistent facts and supersession, the working
set and the environment (layers 1 to 4 of seed 001)."""

from django.apps import AppConfig


class FactsConfig(AppConfig):
    name = "facts"
    verbose_name = "Facts"
