"""A project that forgot ``path("mcp/", include("mcp_django.urls"))`` (system check E170)."""

from django.contrib import admin
from django.urls import path

urlpatterns = [path("admin/", admin.site.urls)]
