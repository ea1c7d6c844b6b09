"""The conversation tab's dashboard routes: the turns page and the compaction runs panel."""

from django.urls import path

from . import views

app_name = "conversation"
urlpatterns = [
    path("sessions/<uuid:session_id>/turns/", views.conversation_page, name="turns"),
    path(
        "sessions/<uuid:session_id>/turns/counterfactual/",
        views.counterfactual_page,
        name="counterfactual",
    ),
    path(
        "sessions/<uuid:session_id>/turns/compactions/",
        views.compactions_fragment,
        name="compactions",
    ),
    path(
        "sessions/<uuid:session_id>/turns/compactions/start/",
        views.compaction_start,
        name="compaction_start",
    ),
    path("sessions/<uuid:session_id>/calls/<int:call_id>/", views.call_detail, name="call"),
]
