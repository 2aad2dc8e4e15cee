"""ASGI entry point: MCP requests go to mcp_django's consumer, the rest to Django."""

import gc
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_site.settings")
django_asgi_app = get_asgi_application()

from mcp_django.routing import MCPRouter  # noqa: E402  (needs Django set up first)

application = MCPRouter(django_asgi_app)

# With any OTEL_ variable set, print mcp_django's spans and metrics on the console. Here, not in
# settings: manage.py mcp_stdio speaks MCP on stdout, where a span must never be printed.
from example_site.telemetry import configure_from_environment  # noqa: E402

configure_from_environment()

# Deployment tuning, not part of mcp_django: move everything loaded at start-up (Django, the
# apps, their modules) out of the garbage collector's reach, so full collections no longer walk
# it. Measured in bench/: p99 of tools/call at concurrency 32 halves (docs/performance.md).
gc.collect()
gc.freeze()
