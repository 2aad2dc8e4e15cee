"""Fixtures and helpers shared by the test modules."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import connections
from django.test import override_settings

from mcp_django.transport.process_loop import process_loop
from tests import fuzzing

# The wheel and its venv (test_packaging.py, test_tutorial.py). Defined once here: imported into
# each module, they would be one fixture per module, and build twice a session.
from tests.packaging_helpers import built, installed  # noqa: F401

#: Marks of the tests that share a server (or a deployment) for the session or a module, as
#: starting one costs seconds. pytest-randomly shuffles every other test; these run after them, as
#: without it: grouped by server, in the order they are written. Some read demo data that others
#: change (a book added, a loan made, quota counters spent): shuffling them found that.
SHARED_SERVER_MARKS = ("e2e", "conformance", "multiprocess", "browser")
_WRITTEN_ORDER = pytest.StashKey[int]()
_collected = itertools.count()


def pytest_itemcollected(item: pytest.Item) -> None:
    item.stash[_WRITTEN_ORDER] = next(_collected)


def _shares_a_server(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(mark) for mark in SHARED_SERVER_MARKS)


def _server(item: pytest.Item) -> object:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("asgi_server") if callspec is not None else None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    shared = sorted(
        (i for i in items if _shares_a_server(i)), key=lambda i: i.stash[_WRITTEN_ORDER]
    )
    servers: dict[object, int] = {}
    for item in shared:
        servers.setdefault(_server(item), len(servers))
    shared.sort(key=lambda item: servers[_server(item)])  # stable: written order within a server
    items[:] = [item for item in items if not _shares_a_server(item)] + shared


fuzzing.load_profile()

#: The test project's MCP_DJANGO; overrides build on it.
BASE_SETTINGS: dict[str, Any] = {"AUTHENTICATION": "none", "SERVER_NAME": "mcp-django-tests"}


async def settle_background_work() -> None:
    """End what a test left running on its event loop and wait for its database work.

    Tasks a test leaves behind (the audit writer, a stream's flusher, a claim being written)
    would be cancelled when the loop closes, but a cancelled task does not stop the call it
    made through ``sync_to_async``: the thread goes on writing, and the test database, shared
    in-memory SQLite, is then locked while pytest-django flushes it ("couldn't be flushed").
    So: cancel them now, and wait for the thread every thread-sensitive call runs on. This
    runs before pytest-django's flush: the django_db marker's fixture is set up first.
    """
    current = asyncio.current_task()
    left = [task for task in asyncio.all_tasks() if task is not current and not task.done()]
    for task in left:
        task.cancel()
    await asyncio.gather(*left, return_exceptions=True)
    await sync_to_async(lambda: None, thread_sensitive=True)()


@pytest.fixture(autouse=True)
async def _settle_background_work() -> AsyncIterator[None]:
    """Every test leaves nothing writing to the database when it ends (see above), on its own
    loop nor on the process loop the plain view runs on (tests driving it with Django's test
    Client)."""
    yield
    await settle_background_work()
    if process_loop.started():
        process_loop.run(settle_background_work())
    forget_announcements()


def forget_announcements() -> None:
    """What a test changed and the coalescer still holds is not announced during a later test:
    sent late from the timer thread, it would read that test's database and use its layer."""
    from django.conf import settings

    if settings.configured:  # tests/protocol run without Django
        from mcp_django.server import notifications

        # Not a test's stand-in (tests/test_notifications.py records what it is handed).
        if isinstance(notifications.coalescer, notifications.Coalescer):
            notifications.coalescer.discard()


@pytest.fixture
async def fresh_channel_layer() -> AsyncIterator[None]:
    """Flush the in-memory layer around a test: it outlives each test's event loop, and queues
    or group memberships left by one test must not reach the next."""
    layer = get_channel_layer()
    await layer.flush()
    yield
    await layer.flush()


@pytest.fixture(autouse=True)
def _fresh_quota_counters() -> None:
    """Quota counters (mcp_django.ops.quotas.limits) live in the cache, which outlives each test, and every
    in-process test calls as the same anonymous address: each test starts from zero."""
    from django.conf import settings
    from django.core.cache import caches

    if settings.configured:  # tests/protocol run without Django
        from mcp_django.ops.quotas import limits as quotas

        caches["default"].clear()
        quotas.forget_local_counts()


def mcp_settings_fixture(**overrides: Any) -> Any:
    """Build an autouse fixture that runs every test of a module under these MCP_DJANGO keys."""

    @pytest.fixture(autouse=True)
    def _mcp_settings() -> Iterator[None]:
        with override_settings(MCP_DJANGO={**BASE_SETTINGS, **overrides}):
            yield

    return _mcp_settings


def make_user(username: str, *codenames: str, app_label: str = "testapp", **fields: Any) -> Any:
    """Create a user holding the given permissions of ``app_label`` (all of them for ``"*"``)."""
    from django.contrib.auth.models import Permission, User

    user = User.objects.create_user(username, password="pw", **fields)
    permissions = Permission.objects.filter(content_type__app_label=app_label)
    if codenames != ("*",):
        permissions = permissions.filter(codename__in=codenames)
    user.user_permissions.add(*permissions)
    return User.objects.get(pk=user.pk)  # a fresh instance: no stale permission cache


@contextmanager
def database_alias(alias: str, config: dict[str, Any]) -> Iterator[str]:
    """Add the database ``alias`` to the running project until the block ends."""
    configured = connections.configure_settings(
        {"default": dict(connections.settings["default"]), alias: config}
    )
    connections.settings[alias] = configured[alias]
    try:
        yield alias
    finally:
        connections[alias].close()
        del connections.settings[alias]


@pytest.fixture
def unmigrated_database(tmp_path: Path, django_db_blocker: Any) -> Iterator[str]:
    """A database alias on a new SQLite file, where ``migrate`` never ran (no table at all).

    For tests without the ``django_db`` mark: a Django test case refuses aliases it did not
    declare, and declared ones get migrated test databases, which is what this is not."""
    # A new alias each time: a thread that served an earlier test keeps its connection per
    # alias (asgiref's thread-sensitive executor outlives tests), open on that test's file.
    alias = f"unmigrated_{tmp_path.name}"
    with (
        django_db_blocker.unblock(),
        database_alias(
            alias,
            {"ENGINE": "django.db.backends.sqlite3", "NAME": str(tmp_path / "unmigrated.sqlite3")},
        ),
    ):
        yield alias


class SessionsOn:
    """A database router that puts mcp_django's models on one alias."""

    def __init__(self, alias: str) -> None:
        self.alias = alias

    def db_for_read(self, model: Any, **hints: Any) -> str | None:
        return self.alias if model._meta.app_label == "mcp_django" else None

    db_for_write = db_for_read
