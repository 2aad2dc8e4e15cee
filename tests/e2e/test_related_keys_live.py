"""A user whose rows are limited to her own cannot point a new row at another user's row
through a related key: the served site refuses the key as one that does not exist."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from .conftest import ExampleServer, connect_as, manage, run_server, server_env

pytestmark = pytest.mark.e2e

SETUP = """
from django.contrib.auth.models import User
from tests.testapp.models import Specimen
mine = User.objects.create_user('mine')
theirs = User.objects.create_user('theirs')
print(Specimen.objects.create(char='their row', owner=theirs).pk)
"""


@pytest.fixture(scope="module")
def projects_server(
    asgi_server: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ExampleServer, int]]:
    workdir = tmp_path_factory.mktemp("e2e-related-keys")
    env = {
        **server_env(workdir / "example.sqlite3", auth="django"),
        "DJANGO_SETTINGS_MODULE": "tests.e2e.settings_projects",
    }
    manage(env, "migrate", "--noinput")
    their_pk = int(manage(env, "shell", "-v0", "-c", SETUP).strip().splitlines()[-1])
    with run_server(env, workdir / f"{asgi_server}.log", server=asgi_server) as server:
        yield server, their_pk


async def test_a_new_row_cannot_point_at_another_users_row(
    projects_server: tuple[ExampleServer, int],
) -> None:
    server, their_pk = projects_server
    async with connect_as(server, "mine") as client:
        hidden = await client.call_tool(
            "testapp_specimen_create", {"char": "mine", "twin": their_pk}
        )
        missing = await client.call_tool(
            "testapp_specimen_create", {"char": "mine", "twin": 987654}
        )
        mine = await client.call_tool("testapp_specimen_search", {})
    texts = [result.content[0].text for result in (hidden, missing)]  # type: ignore[union-attr]
    assert hidden.is_error and missing.is_error
    assert "twin: Invalid pk" in texts[0]
    assert texts[0].replace(str(their_pk), "<key>") == texts[1].replace("987654", "<key>")
    assert json.loads(mine.content[0].text)["items"] == []  # type: ignore[union-attr]
