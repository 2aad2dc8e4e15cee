"""Serve MCP over standard input and output, for clients that start their servers themselves
(desktop assistants, IDE agents, the Inspector)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any
from urllib.parse import urlsplit

from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import FieldDoesNotExist, FieldError
from django.core.management.base import BaseCommand, CommandError
from django.http import HttpRequest

from mcp_django.auth.base import NoAuthentication
from mcp_django.conf import mcp_settings
from mcp_django.registry.sites import all_sites, site
from mcp_django.server.principal import Principal
from mcp_django.tables import missing_tables_message, sessions_database, unapplied_migrations
from mcp_django.transport.stdio import StdioServer


class PipeRequest(HttpRequest):
    """The request of a stdio conversation: no HTTP, but a user and the site's origin."""

    def __init__(self, base_url: str | None) -> None:
        super().__init__()
        parts = urlsplit(base_url or "http://localhost")
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise CommandError(
                "--base-url must be an http(s) origin such as https://library.example.com, not "
                f"{base_url!r}"
            )
        self._scheme = parts.scheme
        self.META["HTTP_HOST"] = parts.netloc
        self.META["SERVER_NAME"] = parts.hostname or "localhost"
        self.META["SERVER_PORT"] = str(parts.port or (443 if parts.scheme == "https" else 80))

    def _get_scheme(self) -> str:
        return self._scheme


def find_user(value: str, field: str | None = None) -> AbstractBaseUser:
    """The one user ``value`` names: by ``field`` alone when given; else by username (the
    natural key, which custom user models define), then by email address, because projects that
    sign people in by email often give them usernames nobody knows. Two users sharing the value
    are an error: running as a guessed one of them would hand out someone else's permissions."""
    User = get_user_model()
    manager = User._default_manager
    if field is None:
        try:
            return manager.get_by_natural_key(value)
        except User.DoesNotExist:
            pass
        email = User.get_email_field_name()
        if not _has_field(User, email):
            raise CommandError(
                f"No user {value!r}: pass an existing {User._meta.verbose_name}'s username to "
                "--user."
            )
        # Addresses are matched case-insensitively, as Django's password reset matches them.
        field, lookup = email, f"{email}__iexact"
        described = "as username or email"
    else:
        if not _has_field(User, field):
            raise CommandError(f"--user-field {field!r} is not a field of {User._meta.label}.")
        lookup = field
        described = f"as {field}"
    try:
        # Two rows are enough to know the value is ambiguous.
        matches = list(manager.filter(**{lookup: value})[:2])
    except (FieldError, ValueError, TypeError) as error:
        raise CommandError(f"--user {value!r} cannot be looked up by {field!r}: {error}") from None
    if not matches:
        raise CommandError(f"No user {value!r}: no {User._meta.verbose_name} has it {described}.")
    if len(matches) > 1:
        raise CommandError(
            f"More than one user has {value!r} {described}: pass the username, or --user-field "
            "with a field that is unique (e.g. --user-field pk)."
        )
    return matches[0]


def _has_field(model: type[Any], name: str) -> bool:
    if name == "pk":
        return True
    try:
        model._meta.get_field(name)
    except FieldDoesNotExist:
        return False
    return True


class Command(BaseCommand):
    help = (
        "Serve MCP over stdin and stdout (newline-delimited JSON-RPC), as the given user. Only "
        "JSON-RPC is "
        "written to stdout; logging, warnings and anything a tool prints go to stderr."
    )
    # The protocol owns stdout: no system-check output may precede it.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--user",
            metavar="USER",
            help="Run with this user's permissions (tools, rows, state): "
            "a username, else an email address.",
        )
        parser.add_argument(
            "--user-field",
            metavar="FIELD",
            default=None,
            help="Find --user by this field of the user model only (e.g. email, or a field of your "
            "own) instead of the username, then the email.",
        )
        parser.add_argument(
            "--site",
            metavar="NAME",
            default=None,
            help="The MCP site to serve, by name (default: the default site).",
        )
        parser.add_argument(
            "--base-url",
            metavar="URL",
            default=None,
            help="The site's public origin (e.g. https://library.example.com), for the pages of "
            "URL "
            "elicitations "
            "(default: the origin of RESOURCE_URL, else http://localhost).",
        )

    def handle(
        self,
        *args: Any,
        user: str | None = None,
        site: str | None = None,
        base_url: str | None = None,
        user_field: str | None = None,
        **options: Any,
    ) -> None:
        # Refused here, on stderr: a forgotten `migrate` would otherwise fail the client's first
        # request on a missing table (and a client of stdio sees no HTTP health page).
        pending = unapplied_migrations()
        if pending:
            raise CommandError(missing_tables_message(pending, sessions_database()))
        principal = self.principal_for(user, base_url, user_field)
        protocol = self.take_stdout()
        mcp_site = self.site_named(site)
        asyncio.run(self.serve(mcp_site, principal, protocol))

    def principal_for(
        self, username: str | None, base_url: str | None = None, user_field: str | None = None
    ) -> Principal:
        """Who the conversation runs as: ``username``, or Django's ``AnonymousUser`` without one
        (so tools read ``ctx.user.is_authenticated``, as in a view)."""
        request = self.request_for(username, base_url, user_field)
        return Principal(request=request, user=request.user, transport="stdio")

    def request_for(
        self, username: str | None, base_url: str | None = None, user_field: str | None = None
    ) -> HttpRequest:
        """What permission hooks read: a request whose user is ``username`` (anonymous without),
        on the site's public origin (where the pages of URL elicitations are)."""
        request = PipeRequest(base_url)
        request.mcp_endpoint_path = "/mcp"  # type: ignore[attr-defined]
        if username is None:
            if user_field is not None:
                raise CommandError(
                    "--user-field names the field --user is looked up by: pass --user too."
                )
            if not issubclass(mcp_settings.authentication_class, NoAuthentication):
                raise CommandError(
                    "This site's MCP_DJANGO['AUTHENTICATION'] requires a user: run mcp_stdio "
                    "--user "
                    "USERNAME "
                    "(the tools then act with that user's permissions)."
                )
            request.user = AnonymousUser()
            return request
        found = find_user(username, user_field)
        if not found.is_active:
            raise CommandError(f"The user {username!r} is inactive.")
        # django-stubs types request.user as auth.User; the project's user model may be another.
        request.user = found  # type: ignore[assignment]
        return request

    @staticmethod
    def site_named(name: str | None) -> Any:
        if name is None:
            return site
        for candidate in all_sites:
            if candidate.name == name:
                return candidate
        raise CommandError(f"No MCP site named {name!r}.")

    @staticmethod
    def take_stdout() -> int:
        """Keep the real stdout for the protocol and point file descriptor 1 at stderr, so that a
        stray print, a warning or a C library's output can never corrupt the JSON-RPC stream."""
        sys.stdout.flush()
        protocol = os.dup(1)
        os.dup2(2, 1)
        return protocol

    async def serve(self, mcp_site: Any, principal: Principal, protocol: int) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=mcp_settings.max_body_size)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        out = os.fdopen(protocol, "wb", buffering=0)

        async def write(data: bytes) -> None:
            # Blocking writes of whole lines keep messages whole; a slow reader slows the server.
            await loop.run_in_executor(None, out.write, data)

        server = StdioServer(mcp_site.engine, principal, write, max_line=mcp_settings.max_body_size)
        stopping = asyncio.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stopping.set)
        serving = loop.create_task(server.serve(reader))
        stop = loop.create_task(stopping.wait())
        await asyncio.wait({serving, stop}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        if not serving.done():
            serving.cancel()
        (ended,) = await asyncio.gather(serving, return_exceptions=True)
        await server.stop()
        if isinstance(ended, Exception):
            raise ended  # on stderr, with a non-zero exit: not a silent end of the conversation
