"""Every stored row of an organization or a session: what a refused request must not move."""

from django.apps import apps

from contextops.models import ApiKey, Organization

APPS = {"contextops", "frames", "facts", "conversation", "rlm"}
# How each model reaches its organization; the rest hang off a session.
ORGANIZATION_PATHS = {
    "Organization": "pk",
    "Agent": "organization",
    "Member": "organization",
    "Session": "organization",
    "Frame": "organization",
    "Fact": "organization",
    "SourceAuthority": "organization",
    "RlmState": "organization",
    "FactDependency": "fact__organization",
    "FactConflict": "organization",
    "RlmVariable": "state__organization",
    "RlmMutation": "state__organization",
    "RlmCheckpoint": "state__organization",
    "TranscriptSource": "organization",
    "TranscriptFile": "source__organization",
    "Import": "organization",
    "HandleAnnotation": "handle__session__organization",
    "ResourceMap": "organization",
    "IdempotencyKey": "organization",
    "AuditEntry": "organization",
}
# Rows of no organization: the price table admins keep for everyone.
SHARED_MODELS = {"ModelPrice"}


def _models():
    for model in apps.get_models():
        # An API key's last_used_at moves with every call its owner makes.
        if (
            model._meta.app_label in APPS
            and model is not ApiKey
            and model.__name__ not in SHARED_MODELS
        ):
            yield model


def organization_rows(name: str) -> dict[str, list[dict]]:
    """Every row of the organization called ``name``, by model, in primary-key order."""
    org = Organization.objects.get(name=name)
    rows = {}
    for model in _models():
        path = ORGANIZATION_PATHS.get(model.__name__, "session__organization")
        rows[model._meta.label] = list(
            model.objects.filter(**{path: org.pk}).order_by("pk").values()
        )
    return rows


def session_rows(session_id) -> dict[str, list[dict]]:
    """The session's own row and every row that belongs to it, by model."""
    rows = {}
    for model in _models():
        names = {f.name for f in model._meta.concrete_fields}
        if model.__name__ == "Session":
            queryset = model.objects.filter(pk=session_id)
        elif "session" in names:
            queryset = model.objects.filter(session_id=session_id)
        else:
            continue
        rows[model._meta.label] = list(queryset.order_by("pk").values())
    return rows
