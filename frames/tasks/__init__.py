"""Celery tasks of the frames app, one module per concern; Celery discovers them here."""

from .paging import *  # noqa: F403
from .suspensions import *  # noqa: F403
