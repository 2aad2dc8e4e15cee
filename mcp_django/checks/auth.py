"""Checks of who may call and see what: the OAuth settings, the trusted external issuers, and
whether model permissions can be granted at all (the authentication backends, trial mode's
anonymous caller)."""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from django.apps import apps
from django.conf import settings
from django.contrib.auth import load_backend
from django.contrib.auth.models import AnonymousUser
from django.core.checks import CheckMessage, Error, Warning
from django.http import HttpRequest
from django.utils.module_loading import import_string

from ..auth.base import NoAuthentication
from ..auth.jwks import ASYMMETRIC_ALGORITHMS, is_loopback
from ..auth.oauth import canonical
from ..conf import AUTHENTICATION_ALIASES, DEFAULTS, mcp_settings
from ..registry.sites import all_sites


def check_oauth(user: dict[str, Any], auth: Any) -> list[CheckMessage]:
    errors: list[CheckMessage] = []
    for key in ("SCOPES_SUPPORTED", "REQUIRED_SCOPES", "AUTHORIZATION_SERVERS"):
        value = user.get(key, DEFAULTS[key])
        if value is not None and (
            not isinstance(value, (list, tuple))
            or not all(isinstance(v, str) and v and " " not in v for v in value)
        ):
            errors.append(
                Error(
                    f"MCP_DJANGO[{key!r}] must be a list of strings without spaces.",
                    id="mcp_django.E013",
                )
            )
    resource = user.get("RESOURCE_URL")
    if resource is not None:
        parts = urlsplit(str(resource))
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.fragment:
            errors.append(
                Error(
                    f"MCP_DJANGO['RESOURCE_URL'] is {resource!r}, which is not an absolute http(s) "
                    "URI without a fragment.",
                    hint='Give the endpoint\'s public URL, e.g. "https://api.example.com/mcp".',
                    id="mcp_django.E012",
                )
            )
    if auth in ("jwt", AUTHENTICATION_ALIASES["jwt"]) or user.get("TRUSTED_ISSUERS"):
        errors += check_external_issuers(user, auth in ("jwt", AUTHENTICATION_ALIASES["jwt"]))
    if auth != "oauth":
        return errors
    if not apps.is_installed("oauth2_provider"):
        errors.append(
            Error(
                "MCP_DJANGO['AUTHENTICATION'] is 'oauth' but django-oauth-toolkit is not "
                "installed.",
                hint="pip install django-oauth-toolkit and add 'oauth2_provider' to "
                "INSTALLED_APPS.",
                id="mcp_django.E011",
            )
        )
    elif _serves_own_authorization_server(user, resource):
        errors += _check_hosted_clients()
    if resource is None and not settings.DEBUG:
        errors.append(
            Warning(
                "MCP_DJANGO['RESOURCE_URL'] is not set: the audience of tokens is checked against "
                "a URL built from each request.",
                hint="Set it to the endpoint's public URL, so the check holds behind proxies and "
                "cannot follow the Host header.",
                id="mcp_django.W005",
            )
        )
    return errors


def check_external_issuers(user: dict[str, Any], active: bool) -> list[CheckMessage]:
    """``TRUSTED_ISSUERS``, ``JWT_USER_HOOK`` and ``JWT_LEEWAY``; ``active``: the "jwt"
    policy is on, so the issuers and a fixed audience are needed, not only well formed."""
    errors: list[CheckMessage] = []
    resource = user.get("RESOURCE_URL")
    entries = user.get("TRUSTED_ISSUERS", DEFAULTS["TRUSTED_ISSUERS"])
    if not isinstance(entries, (list, tuple)) or (active and not entries):
        errors.append(
            Error(
                'MCP_DJANGO["AUTHENTICATION"] is "jwt" but TRUSTED_ISSUERS names no issuer: '
                "every token would be refused."
                if isinstance(entries, (list, tuple))
                else "MCP_DJANGO['TRUSTED_ISSUERS'] must be a list of dicts.",
                hint='Set TRUSTED_ISSUERS = [{"issuer": "https://idp.example.com"}], the issuer '
                "exactly as your identity provider's metadata names it (docs/howto/idp-tokens.md).",
                id="mcp_django.E070",
            )
        )
        entries = entries if isinstance(entries, (list, tuple)) else []
    if active and not resource:
        errors.append(
            Error(
                'MCP_DJANGO["AUTHENTICATION"] is "jwt" but RESOURCE_URL is not set: the audience '
                "tokens must name would follow each request's Host header.",
                hint="Set RESOURCE_URL to the endpoint's public URL, e.g. "
                '"https://api.example.com/mcp": your identity provider issues tokens for it.',
                id="mcp_django.E074",
            )
        )
    subject_issuers = []
    for index, entry in enumerate(entries):
        errors += _check_issuer_entry(index, entry, resource)
        if isinstance(entry, Mapping) and entry.get("user_claim", "sub") == "sub":
            subject_issuers.append(entry)
    if len(subject_issuers) > 1 and any(
        isinstance(e, Mapping) and e.get("user_field", "username") == "username"
        for e in subject_issuers
    ):
        errors.append(
            Warning(
                "Several TRUSTED_ISSUERS match users by their sub claim: each issuer chooses its "
                "subjects, so one issuer's subject may name another issuer's user.",
                hint='Match by a claim the issuers agree on, such as "user_claim": "email", or '
                "write a JWT_USER_HOOK that keeps the issuers' users apart.",
                id="mcp_django.W070",
            )
        )
    if (active or entries) and importlib.util.find_spec("jwt") is None:
        errors.append(
            Error(
                "PyJWT is not installed: tokens from TRUSTED_ISSUERS cannot be verified.",
                hint="pip install 'django-mcp-site[jwt]' (PyJWT with its crypto extra).",
                id="mcp_django.E075",
            )
        )
    hook = user.get("JWT_USER_HOOK", DEFAULTS["JWT_USER_HOOK"])
    try:
        function = import_string(hook) if isinstance(hook, str) else hook
        if not callable(function):
            raise TypeError("not callable")
    except (ImportError, TypeError) as exc:
        errors.append(
            Error(
                f"MCP_DJANGO['JWT_USER_HOOK'] {hook!r} is not usable: {exc}.",
                hint="The dotted path of a function (claims, issuer) -> user or None, or remove "
                "the key to use mcp_django.auth.subjects.default_user_hook.",
                id="mcp_django.E077",
            )
        )
    leeway = user.get("JWT_LEEWAY", DEFAULTS["JWT_LEEWAY"])
    if (
        not isinstance(leeway, (int, float))
        or isinstance(leeway, bool)
        or not math.isfinite(leeway)
        or not 0 <= leeway <= 300
    ):
        errors.append(
            Error(
                f"MCP_DJANGO['JWT_LEEWAY'] is {leeway!r}, not a number of seconds from 0 to 300.",
                hint="A small clock skew, such as the default 60 seconds.",
                id="mcp_django.E078",
            )
        )
    return errors


def _secure_url(url: Any) -> bool:
    """An https URL, or http on loopback while DEBUG is on (tests, development)."""
    parts = urlsplit(str(url))
    if not parts.netloc or parts.fragment or parts.query:
        return False
    if parts.scheme == "https":
        return True
    return parts.scheme == "http" and bool(settings.DEBUG) and is_loopback(str(url))


def _check_issuer_entry(index: int, entry: Any, resource: Any) -> list[CheckMessage]:
    name = f"MCP_DJANGO['TRUSTED_ISSUERS'][{index}]"
    if (
        not isinstance(entry, Mapping)
        or not isinstance(entry.get("issuer"), str)
        or not entry.get("issuer")
    ):
        return [
            Error(
                f"{name} has no issuer.",
                hint='Each entry is a dict with at least "issuer": the issuer URL exactly as the '
                "identity provider's metadata names it.",
                id="mcp_django.E071",
            )
        ]
    errors = issuer_entry_errors(name, entry, urls="mcp_django.E072", algorithms="mcp_django.E076")
    audience = entry.get("audience")
    if audience is not None and (
        resource is None
        or not isinstance(audience, str)
        or canonical(audience) != canonical(str(resource))
    ):
        errors.append(
            Error(
                f"{name}['audience'] is {audience!r}, which is not RESOURCE_URL "
                f"({resource!r}): tokens issued for another resource would be accepted.",
                hint="Remove the key (the audience is RESOURCE_URL), and have the identity "
                "provider put the MCP server's URL in aud (RFC 8707 resource indicators; "
                "docs/howto/idp-tokens.md says how for each provider). Silence the check only "
                "when that audience belongs to this server alone.",
                id="mcp_django.E073",
            )
        )
    return errors


def issuer_entry_errors(
    name: str, entry: Mapping[str, Any], *, urls: str, algorithms: str
) -> list[CheckMessage]:
    """What every trusted issuer's entry is checked for, ``TRUSTED_ISSUERS``' and
    ``ID_JAG_ISSUERS``' alike (ids ``urls`` and ``algorithms``): https URLs for its metadata
    and keys, and asymmetric signature algorithms only."""
    errors: list[CheckMessage] = []
    for key in ("issuer", "jwks_uri"):
        value = entry.get(key)
        if value is not None and not _secure_url(value):
            errors.append(
                Error(
                    f"{name}[{key!r}] is {value!r}, which is not an https URL.",
                    hint="Keys fetched over plain http could be replaced on the way: use https "
                    "(http is accepted only for a loopback issuer while DEBUG is on).",
                    id=urls,
                )
            )
    listed = entry.get("algorithms")
    if listed is not None and (
        not isinstance(listed, (list, tuple))
        or not listed
        or any(a not in ASYMMETRIC_ALGORITHMS for a in listed)
    ):
        errors.append(
            Error(
                f"{name}['algorithms'] is {listed!r}: only asymmetric signature "
                "algorithms are accepted.",
                hint="List some of " + ", ".join(sorted(ASYMMETRIC_ALGORITHMS)) + '; never "none" '
                "or HS256 (its secret would be the issuer's public key), or remove the key.",
                id=algorithms,
            )
        )
    return errors


def _origin(url: Any) -> tuple[str, str]:
    parts = urlsplit(str(url))
    return parts.scheme.lower(), parts.netloc.lower()


def _serves_own_authorization_server(user: dict[str, Any], resource: Any) -> bool:
    """Whether django-oauth-toolkit on this site is the authorization server clients are sent
    to: AUTHORIZATION_SERVERS unset (it defaults to the resource's origin), or naming that
    origin. Unknown without RESOURCE_URL, taken as yes (DOT is installed for a reason)."""
    servers = user.get("AUTHORIZATION_SERVERS")
    if not servers or resource is None or not isinstance(servers, (list, tuple)):
        return True
    return any(_origin(server) == _origin(resource) for server in servers)


def _check_hosted_clients() -> list[CheckMessage]:
    """Claude (and other hosted clients) use a client ID metadata document only when the RFC
    8414 metadata says client_id_metadata_document_supported and lists "none" among the token
    endpoint's auth methods; django-oauth-toolkit's defaults say neither. Read from the
    OAUTH2_PROVIDER dict with DOT's defaults, as its metadata view will."""
    provider = getattr(settings, "OAUTH2_PROVIDER", None) or {}
    if not isinstance(provider, dict):
        return []  # DOT's own settings loading reports that
    cimd = provider.get("CIMD_ENABLED", False)
    methods = provider.get(
        "OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED",
        ["client_secret_post", "client_secret_basic"],
    )
    missing = []
    if cimd is not True:
        missing.append("CIMD_ENABLED is not True")
    if not isinstance(methods, (list, tuple)) or "none" not in methods:
        missing.append('OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED does not list "none"')
    if not missing:
        return []
    return [
        Warning(
            f"OAUTH2_PROVIDER: {' and '.join(missing)}, so the authorization server metadata does "
            "not offer client ID metadata documents to public clients: Claude and other hosted "
            "clients will not identify themselves by one.",
            hint='Set OAUTH2_PROVIDER["CIMD_ENABLED"] = True and add "none" to '
            'OAUTH2_PROVIDER["OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED"] '
            "(docs/howto/oauth-hosted-client.md, Claude).",
            id="mcp_django.W007",
        )
    ]


def _model_entries() -> list[Any]:
    """Every ModelMCP of every site (admin-bridged models included): the entries that the
    user's model permissions gate."""
    return [model_mcp for site in list(all_sites) for model_mcp in site.get_model_mcps()]


def check_permission_sources() -> list[CheckMessage]:
    """Model entries are gated by ``user.has_perm``, which Django answers only from backends
    that implement it: without one (or in trial mode, as the anonymous user) they vanish
    silently."""
    entries = _model_entries()
    if not entries:
        return []
    try:
        auth_class = mcp_settings.authentication_class
    except Exception:
        return []  # check_settings reports an AUTHENTICATION that does not resolve
    if issubclass(auth_class, NoAuthentication):
        return [message for site in list(all_sites) for message in _check_anonymous_entries(site)]
    try:
        backends = [load_backend(path) for path in settings.AUTHENTICATION_BACKENDS]
    except ImportError:
        # Django's own checks and the first request report a backend that does not import.
        return []
    if any(hasattr(backend, "has_perm") for backend in backends):
        return []
    return [
        Warning(
            "No authentication backend can grant model permissions (none has has_perm), so only "
            f"superusers see the {len(entries)} model entr{'y' if len(entries) == 1 else 'ies'} "
            "(ModelMCP, register_admin).",
            hint="Add 'django.contrib.auth.backends.ModelBackend' to AUTHENTICATION_BACKENDS, or "
            "implement has_perm(user_obj, perm, obj=None) in one of your backends.",
            id="mcp_django.W210",
        )
    ]


def _check_anonymous_entries(site: Any) -> list[CheckMessage]:
    """Trial mode: ask each model entry of ``site`` its own hook, as the gate will, whether an
    anonymous caller sees it."""
    request = HttpRequest()
    request.user = AnonymousUser()
    hidden: list[str] = []
    for entry in site.get_model_mcps():
        try:
            visible = entry.has_permission(request)
        except Exception:
            visible = False  # a hook that fails for an anonymous user hides the entry too
        if not visible:
            hidden.append(entry.opts.label)
    if not hidden:
        return []
    shown = ", ".join(sorted(set(hidden))[:10]) + (", ..." if len(set(hidden)) > 10 else "")
    return [
        Warning(
            'AUTHENTICATION is "none": the anonymous caller holds no permissions, so '
            f"{len(hidden)} model entr{'y' if len(hidden) == 1 else 'ies'} of the MCP site "
            f"{site.name!r} {'is' if len(hidden) == 1 else 'are'} hidden from every client: "
            f"{shown}.",
            hint="To open a ModelMCP for a trial, override its has_view_permission (and "
            "has_add/change/delete_permission for writes) to return True when "
            "request.user.is_anonymous; admin-bridged models follow the admin site, which "
            'admits only staff. Or sign in: AUTHENTICATION = "django".',
            obj=site,
            id="mcp_django.W211",
        )
    ]
