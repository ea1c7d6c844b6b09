"""The facts dashboard pages: the list, a key's lineage, and clearing a review flag."""

from django.urls import path

from . import views

app_name = "facts"
urlpatterns = [
    path("facts/", views.fact_list, name="list"),
    path("facts/conflicts/", views.conflict_queue, name="conflicts"),
    path(
        "facts/conflicts/<int:conflict_id>/<str:decision>/",
        views.conflict_decide,
        name="conflict_decide",
    ),
    path("facts/<str:key>/lineage/", views.fact_lineage, name="lineage"),
    path("facts/<str:key>/review/", views.fact_review_clear, name="review_clear"),
]
