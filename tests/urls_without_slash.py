"""A project that wrote ``path("mcp", ...)`` without the trailing slash (system check E180),
once at the top and once under another include."""

from django.urls import include, path, re_path

urlpatterns = [
    path("mcp", include("mcp_django.urls")),
    path("api/", include([re_path(r"^v1/mcp", include("mcp_django.urls", namespace="api"))])),
]
