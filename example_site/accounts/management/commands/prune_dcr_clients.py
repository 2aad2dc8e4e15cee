"""Delete dynamically registered clients nobody uses.

Registration (RFC 7591) is open to anonymous callers, so clients that register and never
come back pile up: every MCP client that loses its stored credentials registers again.
django-oauth-toolkit prunes expired tokens (``cleartokens``) and stale metadata-document
clients (``clearcimdapplications``) but not these. Run all three from cron, e.g. daily::

    python manage.py cleartokens
    python manage.py clearcimdapplications
    python manage.py prune_dcr_clients --days 30
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.utils import timezone
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_grant_model,
    get_refresh_token_model,
)
from oauth2_provider.settings import oauth2_settings


class Command(BaseCommand):
    help = (
        "Delete clients registered through dynamic client registration more than --days ago that "
        "hold no live access token, refresh token or authorization code (their registration "
        "access token does not count)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--days",
            type=int,
            default=30,
            help="Keep clients registered in the last DAYS days (default 30).",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="Only count what would be deleted."
        )

    def handle(self, *args: Any, days: int, dry_run: bool, **options: Any) -> None:
        if days < 0:
            raise CommandError("--days must not be negative.")
        Application = get_application_model()
        now = timezone.now()
        with transaction.atomic():
            candidates = Application.objects.select_for_update().filter(
                registration_source=Application.RegistrationSource.DCR,
                created__lt=now - timedelta(days=days),
            )
            live = set()
            for queryset in (
                get_access_token_model()
                .objects.filter(expires__gt=now)
                .exclude(scope=oauth2_settings.DCR_REGISTRATION_SCOPE),
                get_refresh_token_model().objects.filter(revoked__isnull=True),
                get_grant_model().objects.filter(expires__gt=now),
            ):
                live.update(
                    queryset.filter(application__in=candidates).values_list(
                        "application_id", flat=True
                    )
                )
            prunable = candidates.exclude(pk__in=live)
            count = prunable.count()
            if not dry_run:
                prunable.delete()  # cascades to the registration token and expired rows
        verb = "Would delete" if dry_run else "Deleted"
        self.stdout.write(f"{verb} {count} unused dynamically registered client(s).")
