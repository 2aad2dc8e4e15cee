"""Every field type Django ships, and the user model, as generated tools anyone may use (the
server runs without authentication): what the official client must accept."""

from typing import Any

from django.contrib.auth import get_user_model

from mcp_django import ModelMCP, site
from tests.testapp.models import Specimen

TOOLS = ["search", "get", "create", "update", "delete"]


class OpenMCP(ModelMCP):
    tools = TOOLS

    def _has_perm(self, request: Any, action: str) -> bool:
        return True


@site.register(Specimen)
class SpecimenMCP(OpenMCP):
    filter_fields = ["price", "owner"]


@site.register(get_user_model())
class UserMCP(OpenMCP):
    fields = ["username", "first_name", "last_name", "email", "is_active"]
