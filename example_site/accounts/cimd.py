"""Fetching client ID metadata documents from this machine, for tests and local development.

DOT's ``SafeMetadataFetcher`` refuses every non-public address, loopback included: that is
the SSRF defence a deployed server needs. A test (or a developer) serving a metadata
document on 127.0.0.1 needs the opposite, so this fetcher allows loopback targets and only
them, still over https with certificate verification, without redirects, within DOT's time
and size limits. Every other URL goes through ``oauth.MetadataFetcher`` (DOT's) unchanged.

settings.py installs it only with ``DEBUG`` on and ``OAUTH_CIMD_ALLOW_LOOPBACK=1`` in the
environment; a deployed server never runs it.
"""

from __future__ import annotations

import ssl

import urllib3
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from oauth2_provider.cimd import CIMDError, _validate_client_id_url
from oauth2_provider.settings import oauth2_settings

from mcp_django.auth.oauth_validator import MetadataFetcher

LOOPBACK_ADDRESSES = {"127.0.0.1": "127.0.0.1", "::1": "::1", "localhost": "127.0.0.1"}


class LoopbackMetadataFetcher(MetadataFetcher):
    def fetch(self, client_id):
        parsed = _validate_client_id_url(client_id)  # https, host, path, no userinfo or fragment
        address = LOOPBACK_ADDRESSES.get(parsed.hostname or "")
        if address is None:
            return super().fetch(client_id)
        if not settings.DEBUG:
            # Belt and braces: settings.py already refuses this combination at start-up.
            raise ImproperlyConfigured("LoopbackMetadataFetcher must not run with DEBUG off")

        # A test's own certificate authority, when it is not in the system's trust store.
        cafile = getattr(settings, "OAUTH_CIMD_LOOPBACK_CA_FILE", None) or None
        context = ssl.create_default_context(cafile=cafile)
        timeout = oauth2_settings.CIMD_FETCH_TIMEOUT_SECONDS
        pool = urllib3.HTTPSConnectionPool(
            host=address,
            port=parsed.port or 443,
            timeout=urllib3.Timeout(total=timeout),
            retries=False,
            maxsize=1,
            ssl_context=context,
            server_hostname=parsed.hostname,
        )
        path = parsed.path + (f"?{parsed.query}" if parsed.query else "")
        try:
            response = pool.urlopen(
                "GET",
                path,
                headers={"Host": parsed.netloc, "Accept": "application/json"},
                redirect=False,
                preload_content=False,
            )
            try:
                return self._read_document(response)  # DOT's status, media type and size checks
            finally:
                response.release_conn()
        except urllib3.exceptions.HTTPError as exc:
            raise CIMDError(f"could not fetch client_id document: {exc}") from exc
        finally:
            pool.close()
