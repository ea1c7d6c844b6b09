from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "contextops.notifications"
    label = "notifications"
    verbose_name = "Notifications"
