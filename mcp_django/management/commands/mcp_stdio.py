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
from django.contrib.auth.models import AnonymousUser
from django.core.management.base import BaseCommand, CommandError
from django.http import HttpRequest

from mcp_django.auth.base import NoAuthentication
from mcp_django.conf import mcp_settings
from mcp_django.principal import Principal
from mcp_django.sites import all_sites, site
from mcp_django.tables import missing_tables_message, sessions_database, unapplied_migrations
from mcp_django.transport.stdio import StdioServer


class PipeRequest(HttpRequest):
    """The request of a stdio conversation: no HTTP, but a user and the site's origin."""

    def __init__(self, base_url: str | None) -> None:
        super().__init__()
        parts = urlsplit(base_url or "http://localhost")
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise CommandError(f"--base-url must be an http(s) origin such as https://library.example.com, not {base_url!r}")
        self._scheme = parts.scheme
        self.META["HTTP_HOST"] = parts.netloc
        self.META["SERVER_NAME"] = parts.hostname or "localhost"
        self.META["SERVER_PORT"] = str(parts.port or (443 if parts.scheme == "https" else 80))

    def _get_scheme(self) -> str:
        return self._scheme


class Command(BaseCommand):
    help = (
        "Serve MCP over stdin and stdout (newline-delimited JSON-RPC), as the given user. Only JSON-RPC is "
        "written to stdout; logging, warnings and anything a tool prints go to stderr."
    )
    # The protocol owns stdout: no system-check output may precede it.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--user", metavar="USERNAME", help="Run with this user's permissions (tools, rows, state).")
        parser.add_argument("--site", metavar="NAME", default=None, help="The MCP site to serve, by name (default: the default site).")
        parser.add_argument(
            "--base-url", metavar="URL", default=None,
            help="The site's public origin (e.g. https://library.example.com), for the pages of URL elicitations "
            "(default: the origin of RESOURCE_URL, else http://localhost).",
        )

    def handle(self, *args: Any, user: str | None = None, site: str | None = None, base_url: str | None = None, **options: Any) -> None:
        # Refused here, on stderr: a forgotten `migrate` would otherwise fail the client's first
        # request on a missing table (and a client of stdio sees no HTTP health page).
        pending = unapplied_migrations()
        if pending:
            raise CommandError(missing_tables_message(pending, sessions_database()))
        principal = self.principal_for(user, base_url)
        protocol = self.take_stdout()
        mcp_site = self.site_named(site)
        asyncio.run(self.serve(mcp_site, principal, protocol))

    def principal_for(self, username: str | None, base_url: str | None = None) -> Principal:
        """Who the conversation runs as: ``username``, or Django's ``AnonymousUser`` without one
        (so tools read ``ctx.user.is_authenticated``, as in a view)."""
        request = self.request_for(username, base_url)
        return Principal(request=request, user=request.user, transport="stdio")

    def request_for(self, username: str | None, base_url: str | None = None) -> HttpRequest:
        """What permission hooks read: a request whose user is ``username`` (anonymous without),
        on the site's public origin (where the pages of URL elicitations are)."""
        request = PipeRequest(base_url)
        request.mcp_endpoint_path = "/mcp"  # type: ignore[attr-defined]
        if username is None:
            if not issubclass(mcp_settings.authentication_class, NoAuthentication):
                raise CommandError(
                    "This site's MCP_DJANGO['AUTHENTICATION'] requires a user: run mcp_stdio --user USERNAME "
                    "(the tools then act with that user's permissions)."
                )
            request.user = AnonymousUser()
            return request
        User = get_user_model()
        try:
            found = User._default_manager.get_by_natural_key(username)
        except User.DoesNotExist:
            raise CommandError(f"No user {username!r}: pass an existing {User._meta.verbose_name}'s username to --user.") from None
        if not found.is_active:
            raise CommandError(f"The user {username!r} is inactive.")
        request.user = found
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
