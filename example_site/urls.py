from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    # Serves /mcp and /mcp/ alike (a POST cannot follow a redirect).
    path("mcp", include("mcp_django.urls")),
]
