"""System checks for everything a user can get wrong in configuration (ids mcp_django.E/W0xx).

One module per wing whose settings or objects it checks: ``settings`` (``check_settings``: the
``MCP_DJANGO`` dict and its generic keys; it calls the other modules' setting checks),
``server`` (limits, request state, channel layer, ASGI wiring), ``ops`` (tracing, audit,
quotas), ``tasks`` (the TASKS backend, timings and bounds), ``auth`` (OAuth, where model
permissions come from), ``service_clients`` (the validator and metadata they need),
``registry`` (sites, empty sites, skills), ``urls`` (the endpoint's
routes and prefixes), ``deploy`` (the ``check --deploy`` checks), and ``values`` (what several
of them read). Checks sit at the top of the layers, beside ``apps`` and ``admin``: they may
import any wing, and only ``apps`` imports them, to register the functions named here.
"""

from .deploy import check_deployment, check_migrations, check_proxy
from .registry import check_sites, check_skills
from .settings import check_settings
from .urls import check_urls

__all__ = [
    "check_deployment",
    "check_migrations",
    "check_proxy",
    "check_settings",
    "check_sites",
    "check_skills",
    "check_urls",
]
