"""Authentication backends as many projects write them: plain classes, no ``BaseBackend``.

Django accepts any class with ``authenticate`` and ``get_user``; these have no ``aget_user``
and the first one no ``has_perm``, so mcp_django must not assume either.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.http import HttpRequest


class EmailBackend:
    """Sign in by email and password; grants no permissions."""

    def authenticate(
        self, request: HttpRequest | None, email: str | None = None, password: str | None = None
    ) -> Any:
        User = get_user_model()
        try:
            user = User._default_manager.get(email__iexact=email)
        except (User.DoesNotExist, User.MultipleObjectsReturned):
            return None
        return user if user.check_password(password) and user.is_active else None

    def get_user(self, user_id: Any) -> Any:
        User = get_user_model()
        try:
            return User._default_manager.get(pk=user_id)
        except User.DoesNotExist:
            return None
