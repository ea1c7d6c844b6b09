from django.urls import path

from . import views

app_name = "notifications"
urlpatterns = [
    path("notifications/", views.settings_page, name="settings"),
    path("notifications/deliveries/", views.deliveries, name="deliveries"),
    path("notifications/<uuid:destination_id>/test/", views.destination_test, name="test"),
    path("notifications/<uuid:destination_id>/remove/", views.destination_remove, name="remove"),
]
