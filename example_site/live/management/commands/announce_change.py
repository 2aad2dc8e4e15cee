"""Announce a change to connected MCP clients from outside the server, as any code can.

    manage.py announce_change tools              # notifications/tools/list_changed to every live session
    manage.py announce_change resources prompts
    manage.py announce_change --resource live://runs/1   # notifications/resources/updated to its subscribers

The announcements are stored on each session's standalone stream and sent over the channel
layer, so they reach the server process holding that stream (with a shared layer such as
channels_redis), or wait for the client to resume it.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from mcp_django import site
from mcp_django.server.notifications import LIST_KINDS


class Command(BaseCommand):
    help = "Send notifications/<kind>/list_changed to every live MCP session, or resources/updated to subscribers."

    def add_arguments(self, parser: CommandParser) -> None:
        # No choices=: argparse rejects an empty nargs="*" list against choices (Python < 3.12).
        parser.add_argument(
            "kinds", nargs="*", metavar="{tools,resources,prompts}", help="Which lists changed."
        )
        parser.add_argument(
            "--resource",
            action="append",
            default=[],
            metavar="URI",
            help="A resource URI that changed (repeatable).",
        )

    def handle(self, *args: Any, kinds: list[str], resource: list[str], **options: Any) -> None:
        if not kinds and not resource:
            raise CommandError(
                "Name at least one of tools, resources, prompts, or give --resource URI."
            )
        unknown = [kind for kind in kinds if kind not in LIST_KINDS]
        if unknown:
            raise CommandError(f"Unknown list {unknown[0]!r}: choose from {', '.join(LIST_KINDS)}.")
        for kind in dict.fromkeys(kinds):
            count = site.notify_list_changed(kind)
            self.stdout.write(f"notifications/{kind}/list_changed sent to {count} session(s).")
        for uri in dict.fromkeys(resource):
            count = site.notify_resource_updated(uri)
            self.stdout.write(
                f"notifications/resources/updated for {uri} sent to {count} subscribed session(s)."
            )
