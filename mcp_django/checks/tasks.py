"""Checks of durable tasks' settings (mcp_django.extensions.tasks): the TASKS backend that runs
them, their timings, and what they keep."""

from __future__ import annotations

from importlib import import_module
from importlib.util import find_spec
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning

from ..conf import DEFAULTS
from .values import positive_number


def check_tasks(user: dict[str, Any]) -> list[CheckMessage]:
    """Durable tasks: the TASKS backend that runs them, and their timings."""
    errors: list[CheckMessage] = []
    backend = user.get("TASKS_BACKEND", DEFAULTS["TASKS_BACKEND"])
    if backend is not None:
        framework = next(
            (name for name in ("django.tasks", "django_tasks") if find_spec(name) is not None), None
        )
        if framework is None:
            errors.append(
                Error(
                    f"MCP_DJANGO['TASKS_BACKEND'] is {backend!r}, but Django's task framework is "
                    "not installed.",
                    hint="On Django 5.2 install the backport (pip install 'mcp_django[tasks]') and "
                    'add "django_tasks" to INSTALLED_APPS; Django 6 has django.tasks. Or set '
                    "TASKS_BACKEND to None to run tasks in the web process.",
                    id="mcp_django.E046",
                )
            )
        else:
            task_backends = import_module(framework).task_backends
            if not isinstance(backend, str) or backend not in getattr(settings, "TASKS", {}):
                errors.append(
                    Error(
                        f"MCP_DJANGO['TASKS_BACKEND'] is {backend!r}, which is not an alias of the "
                        "TASKS setting.",
                        hint='Name a TASKS alias, e.g. "default" with {"BACKEND": '
                        '"django_tasks_db.DatabaseBackend"}; None runs tasks in the web '
                        "process that made them.",
                        id="mcp_django.E048",
                    )
                )
            else:
                try:
                    task_backends[backend]
                except Exception as exc:
                    errors.append(
                        Error(
                            f"The TASKS backend {backend!r} cannot be loaded: {exc}.",
                            id="mcp_django.E049",
                        )
                    )
    ttl = user.get("TASK_TTL_MS", DEFAULTS["TASK_TTL_MS"])
    poll = user.get("TASK_POLL_INTERVAL_MS", DEFAULTS["TASK_POLL_INTERVAL_MS"])
    beat = user.get("TASK_HEARTBEAT_SECONDS", DEFAULTS["TASK_HEARTBEAT_SECONDS"])
    timeout = user.get("TASK_HEARTBEAT_TIMEOUT", DEFAULTS["TASK_HEARTBEAT_TIMEOUT"])
    whole = [
        (name, value)
        for name, value in (("TASK_TTL_MS", ttl), ("TASK_POLL_INTERVAL_MS", poll))
        if not (value is None and name == "TASK_TTL_MS")
        and (not isinstance(value, int) or isinstance(value, bool) or value <= 0)
    ]
    for name, value in whole:
        errors.append(
            Error(
                f"MCP_DJANGO[{name!r}] must be a positive integer of milliseconds, not {value!r}.",
                hint="None keeps tasks until deleted by hand." if name == "TASK_TTL_MS" else None,
                id="mcp_django.E047",
            )
        )
    if not positive_number(beat) or not positive_number(timeout) or timeout < 2 * beat:
        errors.append(
            Error(
                f"MCP_DJANGO['TASK_HEARTBEAT_TIMEOUT'] ({timeout!r}) must be a number of seconds "
                f"at least twice TASK_HEARTBEAT_SECONDS ({beat!r}).",
                hint="A running task renews its heartbeat every TASK_HEARTBEAT_SECONDS; one missed "
                "beat must not fail it.",
                id="mcp_django.E050",
            )
        )
    return errors + _check_task_bounds(user, ttl) + _check_deadline(user)


#: Claude stops a call after this many seconds: a deadline at or past it never answers Claude.
CLAUDE_CALL_LIMIT = 300


def _check_deadline(user: dict[str, Any]) -> list[CheckMessage]:
    """TASK_DEADLINE_SECONDS: off (None), or a number of seconds under the clients' limits."""
    value = user.get("TASK_DEADLINE_SECONDS", DEFAULTS["TASK_DEADLINE_SECONDS"])
    if value is None:
        return []
    if not positive_number(value):
        return [
            Error(
                "MCP_DJANGO['TASK_DEADLINE_SECONDS'] must be None or a positive number of "
                f"seconds, not {value!r}.",
                hint="None (the default) calls task tools directly for clients without tasks.",
                id="mcp_django.E262",
            )
        ]
    if value >= CLAUDE_CALL_LIMIT:
        return [
            Warning(
                f"MCP_DJANGO['TASK_DEADLINE_SECONDS'] is {value!r}: Claude stops a call after "
                f"{CLAUDE_CALL_LIMIT} s, before this deadline answers it.",
                hint="Leave the client time to receive the answer, e.g. 240.",
                id="mcp_django.W261",
            )
        ]
    return []


#: The smallest payload or result cap: a task's payload carries the client's _meta too.
MIN_TASK_BYTES = 1024


def _check_task_bounds(user: dict[str, Any], ttl: Any) -> list[CheckMessage]:
    """What a task keeps (payload, result) and how long it waits for its client."""
    errors: list[CheckMessage] = []
    for name in ("TASK_MAX_PAYLOAD_BYTES", "TASK_MAX_RESULT_BYTES"):
        value = user.get(name, DEFAULTS[name])
        if not isinstance(value, int) or isinstance(value, bool) or value < MIN_TASK_BYTES:
            errors.append(
                Error(
                    f"MCP_DJANGO[{name!r}] must be an integer of at least {MIN_TASK_BYTES} bytes, "
                    f"not {value!r}.",
                    hint="Larger ones are refused (payload) or fail the task (result); the default "
                    f"is {DEFAULTS[name]}.",
                    id="mcp_django.E260",
                )
            )
    waited = user.get("TASK_INPUT_TIMEOUT", DEFAULTS["TASK_INPUT_TIMEOUT"])
    if not positive_number(waited):
        errors.append(
            Error(
                "MCP_DJANGO['TASK_INPUT_TIMEOUT'] must be a positive number of seconds, not "
                f"{waited!r}.",
                hint="A task waiting for its client's input longer than this is failed; the "
                f"default is {DEFAULTS['TASK_INPUT_TIMEOUT']}.",
                id="mcp_django.E261",
            )
        )
    elif positive_number(ttl) and waited * 1000 >= ttl:
        errors.append(
            Warning(
                f"MCP_DJANGO['TASK_INPUT_TIMEOUT'] ({waited!r} s) is not shorter than TASK_TTL_MS "
                f"({ttl!r} ms): a task waiting for input expires before it can time out.",
                hint="Give TASK_INPUT_TIMEOUT fewer seconds than the TTL, so that a client that "
                'does not answer hears "input timed out".',
                id="mcp_django.W260",
            )
        )
    return errors
