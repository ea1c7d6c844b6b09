"""The one base of every request body: a field the API does not know is refused.

A typo such as ``"buget": 1`` would otherwise be dropped silently and the request applied
without it; with ``extra="forbid"`` it answers 422 ``validation_error`` naming the field
(``loc: ["body", "payload", "buget"]``). Every ``...In`` schema, nested ones included,
derives from ``BodyIn``; tests/hardening/test_strict_bodies.py checks the API's schema.
"""

from ninja import Schema
from pydantic import ConfigDict


class BodyIn(Schema):
    model_config = ConfigDict(extra="forbid")
