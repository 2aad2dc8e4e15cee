"""Specimens as rows each user sees only of her own (``owner``): a ``twin`` key may point
only at one of them (tests/e2e/test_related_keys_live.py)."""

from __future__ import annotations

from typing import Any

from mcp_django import ModelMCP, site
from tests.testapp.models import Specimen


@site.register(Specimen)
class OwnSpecimenMCP(ModelMCP):
    fields = ["char", "owner", "twin"]
    tools = ["search", "create", "update"]

    def _has_perm(self, request: Any, action: str) -> bool:
        return True  # rows are limited by get_queryset(), not by model permissions

    def get_queryset(self, request: Any) -> Any:
        return super().get_queryset(request).filter(owner_id=request.user.pk)
