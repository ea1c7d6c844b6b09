"""Whether a value is allowed for a subject by the current constraint facts governing it."""

from dataclasses import dataclass
from typing import Any

from django.db.models import Q

from contextops.models import Organization

from .. import supersession as rules
from ..models import Fact


@dataclass
class ConstraintCheck:
    subject: str
    value: Any
    allowed: bool
    checked: list[str]
    violations: list[dict]


def constraints_check(
    *, organization: Organization, subject: str, value: Any, scope_id: str = ""
) -> ConstraintCheck:
    """Whether ``value`` is allowed for ``subject`` by every current constraint fact governing it.

    Global constraints always apply; task and session constraints when ``scope_id`` is theirs.
    """
    scopes = Q(scope=Fact.Scope.GLOBAL)
    if scope_id:
        scopes |= Q(scope__in=[Fact.Scope.TASK, Fact.Scope.SESSION], scope_id=scope_id)
    facts = list(
        Fact.objects.filter(
            organization=organization, is_valid=True, is_constraint=True, subject=subject
        )
        .filter(scopes)
        .order_by("key")
    )
    violations = []
    checked = []
    for fact in facts:
        if not isinstance(fact.constraint, dict):
            continue
        checked.append(fact.key)
        for detail in rules.constraint_violations(fact.constraint, value):
            violations.append(
                {"fact_key": fact.key, "constraint": fact.constraint, "detail": detail}
            )
    return ConstraintCheck(
        subject=subject, value=value, allowed=not violations, checked=checked, violations=violations
    )
