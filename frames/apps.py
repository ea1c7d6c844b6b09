from django.apps import AppConfig


class FramesConfig(AppConfig):
    name = "frames"
    verbose_name = "Sessions and frames"
