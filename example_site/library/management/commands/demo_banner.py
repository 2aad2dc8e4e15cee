"""What ``make run`` prints before it starts Daphne (``make run-wsgi``: gunicorn): where things
are and how to sign in, for the authentication the site runs with (``MCP_AUTH``)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from mcp_django.conf import mcp_settings


class Command(BaseCommand):
    help = "Print the example site's URLs and sign-in for `make run`."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument(
            "--server",
            choices=["daphne", "gunicorn"],
            default="daphne",
            help="daphne: make run (asgi.py); gunicorn: make run-wsgi (wsgi.py)",
        )

    def handle(self, *args: Any, port: int = 8000, server: str = "daphne", **options: Any) -> None:
        base = f"http://127.0.0.1:{port}"
        sign_in = {
            "oauth": "  OAuth clients: users sign in as reader / reader   (MCP_AUTH=none make run: no sign-in)",
            "django": f"  Clients send a Django session cookie: sign in at {base}/accounts/login/ as reader / reader",
            "none": "  No sign-in: MCP_AUTH=none, every client is anonymous",
            "jwt": "  Resource server for "
            + ", ".join(i.get("issuer", "?") for i in mcp_settings.trusted_issuers)
            + ": clients sign in there; its JWT access tokens are accepted (MCP_AUTH=jwt)",
        }.get(str(mcp_settings.get("AUTHENTICATION")), "")
        if mcp_settings.id_jag_issuers:
            sign_in += (
                "\n  Managed connectors: ID-JAGs of "
                + ", ".join(i.get("issuer", "?") for i in mcp_settings.id_jag_issuers)
                + f" are exchanged at {base}/o/token/ (MCP_ID_JAG_ISSUER)"
            )
        # MCP_TASKS_BACKEND=database (settings.py) names a TASKS alias; `make run` starts its worker.
        if server == "gunicorn":
            return self.wsgi(base, sign_in)
        if mcp_settings.tasks_backend:
            tasks = "  Durable tasks: run by `manage.py db_worker` (django-tasks-db), started beside Daphne"
        else:
            tasks = "  Durable tasks: run in the Daphne process   (MCP_TASKS_BACKEND=database make run: in a worker)"
        lines = [
            "",
            f"  MCP endpoint:  {base}/mcp",
            f"  Django admin:  {base}/admin/   (log in as admin / admin)",
            sign_in,
            tasks,
            "  Stop with Ctrl-C.",
            "",
            # Daphne alone spools whole bodies to disk and times nothing out (mcp_django.W184).
            "  This Daphne on 127.0.0.1 is for local use only. On the internet, put a reverse proxy with",
            '  body-size and timeout limits in front of the server: docs/howto/deploy.md, "In front of the server".',
            "",
        ]
        self.stdout.write("\n".join(lines))

    def wsgi(self, base: str, sign_in: str) -> None:
        """The banner of ``make run-wsgi``: gunicorn serves wsgi.py, the endpoint's plain view."""
        if mcp_settings.tasks_backend:
            tasks = "  Durable tasks: run by `manage.py db_worker` (django-tasks-db), started beside gunicorn"
        else:
            tasks = "  Durable tasks: run in the gunicorn worker's process   (no worker: MCP_TASKS_BACKEND was empty)"
        lines = [
            "",
            f"  MCP endpoint:  {base}/mcp   (gunicorn, WSGI: the endpoint's plain view)",
            f"  Django admin:  {base}/admin/   (log in as admin / admin)",
            sign_in,
            tasks,
            "  Stop with Ctrl-C.",
            "",
            "  Under WSGI nothing holds a stream between requests: no GET stream, no resumption, no",
            "  subscriptions/listen (`make run` serves them, with Daphne): docs/howto/deploy.md,",
            '  "Under WSGI".',
            "",
        ]
        self.stdout.write("\n".join(lines))
