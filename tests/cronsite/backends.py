"""The project's own backends, as it wrote them: plain classes, not ``BaseBackend``."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model


class EmailBackend:
    """Sign in by email; usernames are random. No aget_user, no has_perm."""

    def authenticate(
        self, request: Any, username: str | None = None, password: str | None = None, **kwargs: Any
    ) -> Any:
        user = get_user_model()._default_manager.filter(email__iexact=username or "").first()
        if user is not None and password and user.check_password(password) and user.is_active:
            return user
        return None

    def get_user(self, user_id: Any) -> Any:
        return get_user_model()._default_manager.filter(pk=user_id).first()


class MemberPermissionBackend:
    """Every active member may read and add checks; only owners see theirs (get_queryset)."""

    GRANTED = {"monitor.view_check", "monitor.add_check"}

    def authenticate(self, request: Any, **credentials: Any) -> None:
        return None

    def get_user(self, user_id: Any) -> None:
        return None

    def has_perm(self, user_obj: Any, perm: str, obj: Any = None) -> bool:
        return bool(user_obj.is_active and perm in self.GRANTED)
