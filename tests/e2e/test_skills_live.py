"""The example library's skills (example_site/library/mcp_skills/) over a real server, through the
official SDK client in both eras (initialize, then server/discover). The SDK has no skills helper, so ``skills/list``, ``skills/get``
and ``resources/directory/read`` go as raw requests on its session; the files are read with its
own ``read_resource`` and checked against the listed digest and size, as a host must."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Request, TextResourceContents
from pydantic import TypeAdapter

from .conftest import ExampleDatabase, ExampleServer
from .test_stdio import command

pytestmark = pytest.mark.e2e

EXTENSION = "io.modelcontextprotocol/skills"
ANY_RESULT = TypeAdapter(dict[str, Any])


class RawRequest(Request[dict[str, Any] | None, str]):
    """A request the SDK has no type for, sent as is."""

    method: str
    params: dict[str, Any] | None = None


async def raw(client: Client, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return await client.session.send_request(RawRequest(method=method, params=params), ANY_RESULT)


def file_bytes(contents: Any) -> bytes:
    if isinstance(contents, TextResourceContents):
        return contents.text.encode()
    return base64.b64decode(contents.blob)


# "auto" discovers the server (server/discover) and speaks 2026-07-28; "2026-07-28" alone would
# skip discover, so the client would not know the server's capabilities.
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_host_lists_gets_and_reads_the_example_skills_and_their_digests_hold(
    example_server: ExampleServer, mode: str
) -> None:
    async with (
        httpx2.AsyncClient(timeout=10) as http,
        Client(
            streamable_http_client(example_server.mcp_url, http_client=http),
            read_timeout_seconds=10,
            mode=mode,
        ) as client,
    ):
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        assert client.server_capabilities.extensions[EXTENSION] == {"directoryRead": True}  # type: ignore[index]
        listed = await raw(client, "skills/list")
        by_uri = {entry["uri"]: entry for entry in listed["skills"]}
        assert set(by_uri) == {"skill://find-a-book/SKILL.md", "skill://lend-and-renew/SKILL.md"}
        lend = by_uri["skill://lend-and-renew/SKILL.md"]
        assert (
            lend["frontmatter"]["name"] == "lend-and-renew"
            and "borrow" in lend["frontmatter"]["description"]
        )
        assert (await raw(client, "skills/get", {"uri": lend["uri"]}))["skill"] == lend
        for resource in lend["resources"]:
            (contents,) = (await client.read_resource(resource["uri"])).contents
            data = file_bytes(contents)
            assert (
                len(data) == resource["size"]
                and "sha256:" + hashlib.sha256(data).hexdigest() == resource["digest"]
            )
        children = (
            await raw(client, "resources/directory/read", {"uri": "skill://lend-and-renew"})
        )["resources"]
        assert [(c["uri"], c["mimeType"]) for c in children] == [
            ("skill://lend-and-renew/references", "inode/directory"),
            ("skill://lend-and-renew/SKILL.md", "text/markdown"),
        ]
        references = (
            await raw(
                client, "resources/directory/read", {"uri": "skill://lend-and-renew/references"}
            )
        )["resources"]
        assert [c["uri"] for c in references] == ["skill://lend-and-renew/references/loan-rules.md"]
        with pytest.raises(MCPError) as unknown:
            await raw(client, "skills/get", {"uri": "skill://no-such-skill/SKILL.md"})
        assert unknown.value.error.code == -32602


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_stdio_client_gets_the_same_skills_through_the_same_engine(
    example_database: ExampleDatabase, mode: str, tmp_path: Path
) -> None:
    with (tmp_path / "stderr.log").open("w") as errlog:
        async with Client(
            stdio_client(command(example_database, "--user", "librarian"), errlog=errlog),
            mode=mode,
            read_timeout_seconds=20,
        ) as client:
            assert client.server_capabilities.extensions[EXTENSION] == {"directoryRead": True}  # type: ignore[index]
            listed = {entry["uri"]: entry for entry in (await raw(client, "skills/list"))["skills"]}
            entry = listed["skill://find-a-book/SKILL.md"]
            (contents,) = (await client.read_resource(entry["uri"])).contents
    assert (
        "sha256:" + hashlib.sha256(file_bytes(contents)).hexdigest()
        == entry["resources"][0]["digest"]
    )
    assert entry["frontmatter"]["name"] == "find-a-book"
