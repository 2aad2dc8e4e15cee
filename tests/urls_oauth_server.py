"""A project that is its own authorization server, URLconf as docs/authorization.md writes it:
mcp_django's well-known patterns and django-oauth-toolkit's, the /o/ endpoints, the endpoint."""

from django.urls import include, path
from oauth2_provider import urls as oauth2_urls
from oauth2_provider import views as oauth2_views

from mcp_django.urls import well_known_urlpatterns

oauth2_patterns = [
    *(p for p in oauth2_urls.metadata_urlpatterns if p.name.startswith("oauth-server-metadata")),
    path("o/authorize/", oauth2_views.AuthorizationView.as_view(), name="authorize"),
    path("o/token/", oauth2_views.TokenView.as_view(), name="token"),
    path("o/revoke_token/", oauth2_views.RevokeTokenView.as_view(), name="revoke-token"),
]

urlpatterns = [
    *well_known_urlpatterns,
    path("", include((oauth2_patterns, "oauth2_provider"))),
    path("mcp/", include("mcp_django.urls")),
]
