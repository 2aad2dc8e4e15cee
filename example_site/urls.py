from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    # Django's own login page, for users who are not staff (MCP_AUTH=django uses its cookie).
    path("accounts/", include("django.contrib.auth.urls")),
    # Serves /mcp and /mcp/ alike (a POST cannot follow a redirect).
    path("mcp", include("mcp_django.urls")),
]
