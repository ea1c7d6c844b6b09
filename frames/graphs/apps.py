from django.apps import AppConfig


class GraphsConfig(AppConfig):
    name = "frames.graphs"
    label = "graphs"
    verbose_name = "LangGraph threads"
