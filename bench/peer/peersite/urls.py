"""The peer's one route: the MCP server is the view."""

from django.urls import path

from peersite.mcp import server

urlpatterns = [path("mcp", server)]
