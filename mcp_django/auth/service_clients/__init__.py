"""Service clients: machine clients (a nightly agent, a CI job) that obtain tokens with the OAuth
``client_credentials`` grant and act as a Django service user an admin binds them to.

An optional Django app (``"mcp_django.auth.service_clients"`` in ``INSTALLED_APPS``, after
``"oauth2_provider"``): its one model points at django-oauth-toolkit's application model, so
it can be installed only beside DOT. It sits in the ``auth`` wing and imports only Django, DOT
and ``mcp_django.conf``; ``auth.oauth_validator`` reads its model through the app registry, and
imports ``rules`` (what an application must be to act as a service client) directly.
This module itself imports nothing, so that the system checks can name the app without DOT.
"""

#: The app's name in ``INSTALLED_APPS``.
SERVICE_CLIENTS_APP = "mcp_django.auth.service_clients"

#: The grant service clients use, and the only one they may.
CLIENT_CREDENTIALS = "client_credentials"
