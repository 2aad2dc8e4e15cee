import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.cronsite.settings")
django_asgi_app = get_asgi_application()

from mcp_django.routing import MCPRouter  # noqa: E402  (after Django is set up)

application = MCPRouter(django_asgi_app)
