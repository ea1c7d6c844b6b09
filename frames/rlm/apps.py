from django.apps import AppConfig


class RlmConfig(AppConfig):
    name = "frames.rlm"
    label = "rlm"
    verbose_name = "RLM state"
