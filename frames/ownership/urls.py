from django.urls import path

from . import views

app_name = "ownership"
urlpatterns = [
    path("sessions/<uuid:session_id>/export/", views.session_export, name="session_export"),
    path("sessions/<uuid:session_id>/delete/", views.session_delete, name="session_delete"),
]
