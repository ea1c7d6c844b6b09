"""Dashboard logins: throttled and locked out by django-axes, and written to the audit log.

Failed logins are counted per user name and client address together
(``AXES_LOCKOUT_PARAMETERS``); after ``AXES_FAILURE_LIMIT`` of them that pair is locked
out for ``AXES_COOLOFF_TIME`` and the login page answers 429 with
``registration/lockout.html``. Every login, failed login, lockout and logout becomes an
audit entry (contextops.audit).
"""

from typing import Any

from axes.backends import AxesStandaloneBackend
from axes.signals import user_locked_out
from django.contrib.auth.models import User
from django.contrib.auth.signals import user_logged_in, user_logged_out, user_login_failed
from django.dispatch import receiver
from django.http import HttpRequest

from .audit import audit_record
from .models import AuditEntry


class LoginThrottleBackend(AxesStandaloneBackend):  # type: ignore[misc]  # django-axes ships no types
    """axes' lockout check for a login that comes with a request (the login page, the
    admin's). One without a request (a shell, the test client's ``login``) has no address
    to throttle: it goes on to the password check of the next backend."""

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> User | None:
        if request is None:
            return None
        user: User | None = super().authenticate(
            request, username=username, password=password, **kwargs
        )
        return user


def _user_named(username: str) -> User | None:
    return User.objects.filter(username=username).first() if username else None


@receiver(user_logged_in, dispatch_uid="contextops_audit_login")
def _logged_in(sender: object, request: HttpRequest, user: User, **kwargs: Any) -> None:
    audit_record(action=AuditEntry.Action.LOGIN, user=user, request=request, target="dashboard")


@receiver(user_login_failed, dispatch_uid="contextops_audit_login_failed")
def _login_failed(
    sender: object,
    credentials: dict[str, Any],
    request: HttpRequest | None = None,
    **kwargs: Any,
) -> None:
    username = str(credentials.get("username", ""))[:150]
    audit_record(
        action=AuditEntry.Action.LOGIN_FAILED,
        actor=username or "(no user name)",
        user=_user_named(username),
        request=request,
        target="dashboard",
        detail={"username": username},
    )


@receiver(user_locked_out, dispatch_uid="contextops_audit_locked_out")
def _locked_out(
    sender: object,
    request: HttpRequest | None,
    username: str | None,
    ip_address: str,
    **kwargs: Any,
) -> None:
    audit_record(
        action=AuditEntry.Action.LOCKED_OUT,
        actor=username or "(no user name)",
        user=_user_named(username or ""),
        request=request,
        target="dashboard",
        detail={"username": username, "address": ip_address},
    )


@receiver(user_logged_out, dispatch_uid="contextops_audit_logout")
def _logged_out(sender: object, request: HttpRequest, user: User | None, **kwargs: Any) -> None:
    if user is not None:
        audit_record(action=AuditEntry.Action.LOGOUT, user=user, request=request)
