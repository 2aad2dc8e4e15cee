"""Authentication policies for the MCP endpoint (``MCP_DJANGO["AUTHENTICATION"]``), and the
django-oauth-toolkit validator a project that is its own authorization server names in
``OAUTH2_PROVIDER`` (``oauth_validator``, imported only by DOT), with the optional app of its
service clients (``service_clients``: machine clients with the client_credentials grant)."""
