from django.urls import path

from . import views

app_name = "rlm"
urlpatterns = [
    path("rlm/", views.state_list, name="state_list"),
    path("rlm/<str:state_id>/", views.state_detail, name="state_detail"),
    path("rlm/<str:state_id>/rollback/", views.state_rollback, name="state_rollback"),
]
