from django.urls import path

from . import views as suspension_views

app_name = "suspensions"
urlpatterns = [
    path("inbox/", suspension_views.inbox, name="inbox"),
    path("inbox/<uuid:frame_id>/<str:hashed>/approve/", suspension_views.approve, name="approve"),
    path("inbox/<uuid:frame_id>/<str:hashed>/reject/", suspension_views.reject, name="reject"),
]
