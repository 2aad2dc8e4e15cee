"""The "Sign users in" step of docs/howto/add-to-project.md, line for line: Django's auth views beside the endpoint."""

from django.urls import include, path

urlpatterns = [path("mcp/", include("mcp_django.urls"))]
urlpatterns += [path("accounts/", include("django.contrib.auth.urls"))]
