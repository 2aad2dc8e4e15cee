"""A project that is its own authorization server and takes ID-JAG assertions: as
tests/urls_oauth_server.py, with the RFC 8414 metadata served by mcp_django's view, which
advertises the jwt-bearer grant (docs/howto/managed-connectors.md)."""

from django.urls import include, path
from oauth2_provider import views as oauth2_views

from mcp_django.auth.oauth_server import metadata_urlpatterns
from mcp_django.urls import well_known_urlpatterns

oauth2_patterns = [
    *metadata_urlpatterns,
    path("o/authorize/", oauth2_views.AuthorizationView.as_view(), name="authorize"),
    path("o/token/", oauth2_views.TokenView.as_view(), name="token"),
    path("o/revoke_token/", oauth2_views.RevokeTokenView.as_view(), name="revoke-token"),
]

urlpatterns = [
    *well_known_urlpatterns,
    path("", include((oauth2_patterns, "oauth2_provider"))),
    path("mcp/", include("mcp_django.urls")),
]
