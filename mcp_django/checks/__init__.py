"""System checks for everything a user can get wrong in configuration (ids mcp_django.E/W0xx)."""

from .settings import (
    check_deployment,
    check_migrations,
    check_proxy,
    check_settings,
    check_sites,
    check_skills,
    check_urls,
)

__all__ = [
    "check_deployment",
    "check_migrations",
    "check_proxy",
    "check_settings",
    "check_sites",
    "check_skills",
    "check_urls",
]
