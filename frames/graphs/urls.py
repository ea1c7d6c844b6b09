from django.urls import path

from . import views

app_name = "graphs"
urlpatterns = [
    path("langgraph/<uuid:pk>/", views.thread_detail, name="thread_detail"),
]
