from django.contrib import admin
from django.contrib.staticfiles.urls import staticfiles_urlpatterns
from django.urls import include, path
from oauth2_provider import views as oauth2_views

from example_site.accounts.views import ConnectedApplicationsView, ConsentView, RegistrationView
from mcp_django.auth.oauth_server import metadata_urlpatterns as id_jag_metadata_urlpatterns
from mcp_django.urls import well_known_urlpatterns

# The authorization server, under DOT's namespace (its views reverse "oauth2_provider:...").
# Only what an MCP client uses: no implicit or device flow, no introspection (the MCP endpoint
# reads tokens from the database), no OIDC, no application-management pages (the admin has them).
oauth2_patterns = [
    # RFC 8414 metadata at the domain root, where strict clients look for it, and in its
    # path-suffixed form for an issuer with a path (the site under a prefix: issuer
    # http://host/app, metadata at /.well-known/oauth-authorization-server/app; the issuer is
    # OIDC_ISS_ENDPOINT either way). mcp_django's view is DOT's, listing the jwt-bearer grant
    # too while MCP_ID_JAG_ISSUER is set (managed connectors). DOT's protected-resource
    # metadata views are left out: mcp_django serves that document (this site's resource and
    # scopes).
    *id_jag_metadata_urlpatterns,
    path("o/authorize/", ConsentView.as_view(), name="authorize"),
    path("o/token/", oauth2_views.TokenView.as_view(), name="token"),
    path("o/revoke_token/", oauth2_views.RevokeTokenView.as_view(), name="revoke-token"),
    path("o/register/", RegistrationView.as_view(), name="dcr-register"),
    path(
        "o/register/<str:client_id>/",
        oauth2_views.DynamicClientRegistrationManagementView.as_view(),
        name="dcr-register-management",
    ),
]

urlpatterns = [
    # The endpoint's protected-resource metadata under WSGI (under ASGI the router answers first).
    *well_known_urlpatterns,
    path("admin/", admin.site.urls),
    # Django's own login page: the consent page sends users here first.
    path("accounts/", include("django.contrib.auth.urls")),
    # Every user's list of the applications acting for them, with a revoke button each.
    path(
        "accounts/applications/", ConnectedApplicationsView.as_view(), name="connected-applications"
    ),
    path("", include((oauth2_patterns, "oauth2_provider"))),
    # Serves /mcp and /mcp/ alike (a POST cannot follow a redirect).
    path("mcp/", include("mcp_django.urls")),
]

# With DEBUG on (make run, the tests), Django serves the admin's and the consent page's CSS
# itself: daphne serves no files. Without DEBUG this adds nothing (a deployment runs
# collectstatic and serves /static/ from its web server).
urlpatterns += staticfiles_urlpatterns()
