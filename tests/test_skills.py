"""Skills (the io.modelcontextprotocol/skills extension, mcp_django/skills.py): discovery from app
folders and code, the one gate, digests kept per file version, limits, pagination, invalid
params, both protocol eras, and the system checks E190-E196, W190, W191."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from mcp_django.checks import check_skills
from mcp_django.exceptions import AlreadyRegistered
from mcp_django.extensions import skills
from mcp_django.protocol.errors import INVALID_PARAMS, RESOURCE_NOT_FOUND
from mcp_django.registry.sites import MCPSite
from mcp_django.testing import MCPTestClient
from mcp_django.transport.consumers import MCPConsumer
from tests.conftest import BASE_SETTINGS, make_user
from tests.test_gates import _token
from tests.transport.test_stateless import body, post

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_channel_layer"),
]

EXTENSION = "io.modelcontextprotocol/skills"
SKILLAPP = Path(__file__).parent / "skillapp"


@pytest.fixture(autouse=True)
def _fresh_caches() -> Any:
    skills.clear_caches()
    yield
    skills.clear_caches()


def write_skill(
    root: Path,
    name: str,
    frontmatter: str | None = None,
    files: dict[str, str | bytes] | None = None,
) -> Path:
    """A skill folder ``root/name`` with a SKILL.md (``frontmatter`` between the --- lines)."""
    folder = root / name
    folder.mkdir(parents=True)
    front = (
        frontmatter if frontmatter is not None else f"name: {name}\ndescription: Do {name} things."
    )
    (folder / "SKILL.md").write_text(f"---\n{front}\n---\n\n# {name}\n")
    for path, content in (files or {}).items():
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
    return folder


def site_with(*folders: Path, **gates: Any) -> MCPSite:
    mcp = MCPSite(name="skills")
    for folder in folders:
        mcp.skill(folder, **gates)
    return mcp


async def client_for(mcp: MCPSite, raw_token: str | None = None) -> MCPTestClient:
    headers = {"authorization": f"Bearer {raw_token}"} if raw_token else None
    client = MCPTestClient(MCPConsumer.as_asgi(site=mcp), headers=headers)
    await client.initialize()
    return client


async def error_of(client: MCPTestClient, method: str, params: dict[str, Any]) -> dict[str, Any]:
    response = await client.request(method, params)
    assert "error" in response, response
    return dict(response["error"])


def ids(messages: list[Any]) -> list[str]:
    return [m.id for m in messages]


# -- discovery ------------------------------------------------------------------------------------


def test_app_folders_are_read_in_installed_apps_order_and_the_first_app_wins(
    tmp_path: Path,
) -> None:
    first = write_skill(tmp_path / "first" / "mcp_skills", "shared")
    write_skill(tmp_path / "second" / "mcp_skills", "shared")
    write_skill(tmp_path / "second" / "mcp_skills", "own")
    configs = [
        SimpleNamespace(path=str(tmp_path / "first"), label="first"),
        SimpleNamespace(path=str(tmp_path / "second"), label="second"),
    ]
    found = skills.discover(configs)
    assert [(s.name, s.directory) for s in found] == [
        ("shared", first),
        ("own", tmp_path / "second" / "mcp_skills" / "own"),
    ]
    assert found[0].origin == "app first"


def test_skills_of_installed_apps_are_served_by_every_site_and_found_again_when_apps_change() -> (
    None
):
    assert MCPSite().get_skills() == []
    with override_settings(INSTALLED_APPS=[*settings.INSTALLED_APPS, "tests.skillapp"]):
        assert [s.name for s in MCPSite().get_skills()] == ["greet-readers"]
        assert MCPSite().get_skill("greet-readers") is not None
    assert MCPSite().get_skills() == []


def test_a_site_may_leave_the_app_folders_out() -> None:
    class CodeOnly(MCPSite):
        app_skills = False

    with override_settings(INSTALLED_APPS=[*settings.INSTALLED_APPS, "tests.skillapp"]):
        assert CodeOnly().get_skills() == []
        assert CodeOnly().get_skill("greet-readers") is None


def test_a_skill_registered_in_code_takes_the_place_of_an_app_folder_skill_of_its_name(
    tmp_path: Path,
) -> None:
    mine = write_skill(tmp_path, "greet-readers")
    with override_settings(INSTALLED_APPS=[*settings.INSTALLED_APPS, "tests.skillapp"]):
        mcp = site_with(mine, permission="testapp.view_note")
        assert [s.directory for s in mcp.get_skills()] == [mine]
        assert mcp.get_skill("greet-readers").permissions == ("testapp.view_note",)  # type: ignore[union-attr]


def test_registering_a_skill_name_twice_raises_already_registered(tmp_path: Path) -> None:
    mcp = site_with(write_skill(tmp_path / "a", "twice"))
    with pytest.raises(AlreadyRegistered, match="skill 'twice'"):
        mcp.skill(write_skill(tmp_path / "b", "twice"))
    mcp.unregister("skill", "twice")
    assert mcp.get_skills() == []


def test_a_site_with_skills_declares_resources_and_the_extension_with_directory_read(
    tmp_path: Path,
) -> None:
    assert "extensions" not in MCPSite().get_capabilities()
    capabilities = site_with(write_skill(tmp_path, "one")).get_capabilities()
    assert capabilities["extensions"] == {EXTENSION: {"directoryRead": True}}
    assert "resources" in capabilities
    assert {"skills/list", "skills/get", "resources/directory/read", "resources/read"} <= set(
        site_with(write_skill(tmp_path / "x", "two")).get_handlers()
    )


# -- the methods, handshake era -----------------------------------------------------------------


@override_settings(MCP_DJANGO=BASE_SETTINGS)
async def test_skills_list_entry_carries_uri_frontmatter_as_in_the_file_and_every_file_with_digest_and_size(
    tmp_path: Path,
) -> None:
    folder = write_skill(
        tmp_path,
        "lend",
        "name: lend\ndescription: 'Lend: a book'\nlicense: MIT\nmetadata:\n  owner: library",
        {"references/rules.md": "# Rules\n", "scripts/check.py": "print(1)\n"},
    )
    client = await client_for(site_with(folder))
    assert client.initialize_result["capabilities"]["extensions"][EXTENSION] == {
        "directoryRead": True
    }  # type: ignore[index]
    (entry,) = (await client.call("skills/list"))["skills"]
    assert entry["uri"] == "skill://lend/SKILL.md"
    text = (folder / "SKILL.md").read_text()
    assert (
        entry["frontmatter"]
        == yaml.safe_load(text.split("---\n")[1])
        == {
            "name": "lend",
            "description": "Lend: a book",
            "license": "MIT",
            "metadata": {"owner": "library"},
        }
    )
    expected = [
        (
            f"skill://lend/{path}",
            "sha256:" + hashlib.sha256((folder / path).read_bytes()).hexdigest(),
            (folder / path).stat().st_size,
        )
        for path in ("SKILL.md", "references/rules.md", "scripts/check.py")
    ]
    assert [(r["uri"], r["digest"], r["size"]) for r in entry["resources"]] == expected


@override_settings(MCP_DJANGO=BASE_SETTINGS)
async def test_skills_get_returns_the_listed_entry(tmp_path: Path) -> None:
    client = await client_for(site_with(write_skill(tmp_path, "one", files={"a.md": "a"})))
    (listed,) = (await client.call("skills/list"))["skills"]
    got = await client.call("skills/get", {"uri": "skill://one/SKILL.md"})
    assert got == {"skill": listed}


@override_settings(MCP_DJANGO=BASE_SETTINGS)
async def test_skill_files_are_read_with_resources_read_text_or_blob(tmp_path: Path) -> None:
    folder = write_skill(
        tmp_path,
        "one",
        files={"references/notes.md": "é notes\n", "assets/logo.png": b"\x89PNG\r\n\x1a\n\xff"},
    )
    client = await client_for(site_with(folder))
    (manifest,) = (await client.call("resources/read", {"uri": "skill://one/SKILL.md"}))["contents"]
    assert manifest == {
        "uri": "skill://one/SKILL.md",
        "mimeType": "text/markdown",
        "text": (folder / "SKILL.md").read_text(),
    }
    (notes,) = (await client.call("resources/read", {"uri": "skill://one/references/notes.md"}))[
        "contents"
    ]
    assert notes["text"].encode() == (folder / "references/notes.md").read_bytes()
    (logo,) = (await client.call("resources/read", {"uri": "skill://one/assets/logo.png"}))[
        "contents"
    ]
    assert logo["mimeType"] == "image/png" and "blob" in logo and "text" not in logo


@override_settings(MCP_DJANGO=BASE_SETTINGS)
async def test_only_listed_files_are_read_never_a_path_out_of_the_folder_a_hidden_file_or_a_link(
    tmp_path: Path,
) -> None:
    folder = write_skill(tmp_path / "skills", "one", files={".secret": "s"})
    (tmp_path / "skills" / "outside.md").write_text("outside")
    os.symlink(tmp_path / "skills" / "outside.md", folder / "link.md")
    client = await client_for(site_with(folder))
    (entry,) = (await client.call("skills/list"))["skills"]
    assert [r["uri"] for r in entry["resources"]] == ["skill://one/SKILL.md"]
    for uri in (
        "skill://one/../outside.md",
        "skill://one/.secret",
        "skill://one/link.md",
        "skill://one/missing.md",
        "skill://two/SKILL.md",
    ):
        assert (await error_of(client, "resources/read", {"uri": uri}))[
            "code"
        ] == RESOURCE_NOT_FOUND, uri


@override_settings(MCP_DJANGO=BASE_SETTINGS)
async def test_resources_list_lists_each_skill_md_named_and_described_by_its_frontmatter(
    tmp_path: Path,
) -> None:
    client = await client_for(site_with(write_skill(tmp_path, "one", files={"more.md": "m"})))
    listed = (await client.call("resources/list"))["resources"]
    assert listed == [
        {
            "uri": "skill://one/SKILL.md",
            "name": "one",
            "description": "Do one things.",
            "mimeType": "text/markdown",
            "size": (tmp_path / "one" / "SKILL.md").stat().st_size,
        },
    ]


@override_settings(MCP_DJANGO=BASE_SETTINGS)
async def test_directory_read_lists_direct_children_with_folders_as_inode_directory(
    tmp_path: Path,
) -> None:
    client = await client_for(
        site_with(
            write_skill(
                tmp_path,
                "one",
                files={"references/a.md": "a", "references/deep/b.md": "b", "top.txt": "t"},
            )
        )
    )
    root = (await client.call("resources/directory/read", {"uri": "skill://one"}))["resources"]
    assert [(r["uri"], r["mimeType"]) for r in root] == [
        ("skill://one/references", "inode/directory"),
        ("skill://one/SKILL.md", "text/markdown"),
        ("skill://one/top.txt", "text/plain"),
    ]
    sub = (await client.call("resources/directory/read", {"uri": "skill://one/references"}))[
        "resources"
    ]
    assert [(r["uri"], r["name"], r["mimeType"]) for r in sub] == [
        ("skill://one/references/deep", "deep", "inode/directory"),
        ("skill://one/references/a.md", "a.md", "text/markdown"),
    ]


@override_settings(MCP_DJANGO=BASE_SETTINGS)
async def test_unknown_skills_files_and_non_directories_are_invalid_params(tmp_path: Path) -> None:
    client = await client_for(
        site_with(write_skill(tmp_path, "one", files={"references/a.md": "a"}))
    )
    for method, params in [
        ("skills/get", {"uri": "skill://mcp-conformance-nonexistent-skill-9f3a2b/SKILL.md"}),
        ("skills/get", {"uri": "skill://one/references/a.md"}),  # a file, not the skill
        ("skills/get", {"uri": "https://example.com/SKILL.md"}),
        ("skills/get", {}),
        ("skills/list", {"cursor": "not a cursor"}),
        ("resources/directory/read", {"uri": "skill://one/SKILL.md"}),
        ("resources/directory/read", {"uri": "skill://one/references/a.md"}),
        ("resources/directory/read", {"uri": "skill://one/nowhere"}),
        ("resources/directory/read", {"uri": "skill://two"}),
    ]:
        assert (await error_of(client, method, params))["code"] == INVALID_PARAMS, (method, params)


@override_settings(MCP_DJANGO={**BASE_SETTINGS, "PAGE_SIZE": 2})
async def test_skills_list_and_directory_read_page_whole_entries_through_next_cursor(
    tmp_path: Path,
) -> None:
    folders = [
        write_skill(tmp_path, name, files={f"f{i}.md": str(i) for i in range(3)})
        for name in ("a-one", "b-two", "c-three")
    ]
    client = await client_for(site_with(*folders))
    pages, cursor = [], None
    while True:
        result = await client.call("skills/list", {"cursor": cursor} if cursor else {})
        pages.append([e["uri"] for e in result["skills"]])
        cursor = result.get("nextCursor")
        if cursor is None:
            break
    assert pages == [
        ["skill://a-one/SKILL.md", "skill://b-two/SKILL.md"],
        ["skill://c-three/SKILL.md"],
    ]
    first = await client.call("resources/directory/read", {"uri": "skill://a-one"})
    rest = await client.call(
        "resources/directory/read", {"uri": "skill://a-one", "cursor": first["nextCursor"]}
    )
    assert len(first["resources"]) == 2 and len(rest["resources"]) == 2 and "nextCursor" not in rest


# -- digests --------------------------------------------------------------------------------------


def test_digests_are_computed_once_per_file_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = write_skill(tmp_path, "one", files={"a.md": "first"})
    hashed: list[int] = []
    real = hashlib.sha256

    def counting(data: bytes = b"") -> Any:
        hashed.append(len(data))
        return real(data)

    monkeypatch.setattr(skills.hashlib, "sha256", counting)
    skill = skills.Skill(folder)
    before = skill.load()
    assert skill.load() == before and len(hashed) == 2  # SKILL.md and a.md, hashed once
    (folder / "a.md").write_text("second, longer")
    after = skill.load()
    assert len(hashed) == 3  # only the changed file again
    assert (
        after.files[1].digest
        == "sha256:" + real(b"second, longer").hexdigest()
        != before.files[1].digest
    )


# -- limits ---------------------------------------------------------------------------------------


@override_settings(MCP_DJANGO=BASE_SETTINGS)
async def test_a_skill_over_the_limits_is_not_served_and_its_check_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    small = write_skill(tmp_path, "small")
    many = write_skill(tmp_path, "many", files={f"f{i}.md": "x" for i in range(3)})
    big = write_skill(tmp_path, "big", files={"blob.bin": b"\0" * 400})
    monkeypatch.setattr(skills, "MAX_RESOURCES", 3)
    monkeypatch.setattr(skills, "MAX_TOTAL_BYTES", 300)
    client = await client_for(site_with(small, many, big))
    assert [e["uri"] for e in (await client.call("skills/list"))["skills"]] == [
        "skill://small/SKILL.md"
    ]
    assert (await error_of(client, "skills/get", {"uri": "skill://many/SKILL.md"}))[
        "code"
    ] == INVALID_PARAMS
    assert ids(skills.Skill(many).problems()) == ["mcp_django.E195"]
    assert ids(skills.Skill(big).problems()) == ["mcp_django.E196"]


# -- the gate -------------------------------------------------------------------------------------

OAUTH = {
    **BASE_SETTINGS,
    "AUTHENTICATION": "oauth",
    "RESOURCE_URL": "https://mcp.example.com/mcp",
    "SCOPES_SUPPORTED": ["notes:read", "notes:write"],
}


@sync_to_async
def user_token(username: str, scope: str, *codenames: str) -> str:
    return _token(make_user(username, *codenames), scope)


@override_settings(MCP_DJANGO=OAUTH)
async def test_a_skill_the_user_may_not_use_is_not_listed_not_gettable_and_its_files_not_readable(
    tmp_path: Path,
) -> None:
    mcp = site_with(
        write_skill(tmp_path, "secret", files={"references/a.md": "a"}),
        permission="testapp.delete_note",
    )
    client = await client_for(mcp, await user_token("alice", "notes:read"))
    assert (await client.call("skills/list"))["skills"] == []
    assert (await client.call("resources/list"))["resources"] == []
    assert (await error_of(client, "skills/get", {"uri": "skill://secret/SKILL.md"}))[
        "code"
    ] == INVALID_PARAMS
    assert (await error_of(client, "resources/directory/read", {"uri": "skill://secret"}))[
        "code"
    ] == INVALID_PARAMS
    for uri in ("skill://secret/SKILL.md", "skill://secret/references/a.md"):
        assert (await error_of(client, "resources/read", {"uri": uri}))[
            "code"
        ] == RESOURCE_NOT_FOUND
    allowed = await client_for(mcp, await user_token("bob", "notes:read", "delete_note"))
    assert [e["uri"] for e in (await allowed.call("skills/list"))["skills"]] == [
        "skill://secret/SKILL.md"
    ]
    assert (await allowed.call("resources/read", {"uri": "skill://secret/references/a.md"}))[
        "contents"
    ][0]["text"] == "a"


@override_settings(MCP_DJANGO=OAUTH)
async def test_a_skill_whose_scope_the_token_lacks_is_listed_and_getting_or_reading_it_asks_to_step_up(
    tmp_path: Path,
) -> None:
    mcp = site_with(write_skill(tmp_path, "lend"), scopes=["notes:write"])
    client = await client_for(mcp, await user_token("alice", "notes:read"))
    assert [e["uri"] for e in (await client.call("skills/list"))["skills"]] == [
        "skill://lend/SKILL.md"
    ]
    for method, params in [
        ("skills/get", {"uri": "skill://lend/SKILL.md"}),
        ("resources/read", {"uri": "skill://lend/SKILL.md"}),
        ("resources/directory/read", {"uri": "skill://lend"}),
    ]:
        response = await client.post(
            {"jsonrpc": "2.0", "id": client.next_id(), "method": method, "params": params}
        )
        assert response.status == 403, method
        challenge = response.headers["www-authenticate"]
        assert (
            challenge.startswith('Bearer error="insufficient_scope"')
            and "notes:write" in challenge.split('scope="')[1]
        ), challenge
    stepped_up = await client_for(mcp, await user_token("bob", "notes:read notes:write"))
    assert (await stepped_up.call("skills/get", {"uri": "skill://lend/SKILL.md"}))["skill"][
        "uri"
    ] == "skill://lend/SKILL.md"


# -- 2026-07-28 ----------------------------------------------------------------------------------


@override_settings(MCP_DJANGO=BASE_SETTINGS)
async def test_the_2026_era_declares_the_extension_in_discover_and_caches_skills_list_and_get(
    tmp_path: Path,
) -> None:
    client = MCPTestClient(MCPConsumer.as_asgi(site=site_with(write_skill(tmp_path, "one"))))
    discovered = (await post(client, body("server/discover"))).json()["result"]
    assert discovered["capabilities"]["extensions"][EXTENSION] == {"directoryRead": True}
    listed = (await post(client, body("skills/list"))).json()["result"]
    assert [e["uri"] for e in listed["skills"]] == ["skill://one/SKILL.md"]
    assert listed["ttlMs"] >= 0 and listed["cacheScope"] == "public"
    got = (await post(client, body("skills/get", {"uri": "skill://one/SKILL.md"}))).json()["result"]
    assert (
        got["skill"] == listed["skills"][0]
        and "ttlMs" in got
        and "cacheScope" in got
        and "nextCursor" not in got
    )
    missing = (await post(client, body("resources/read", {"uri": "skill://one/nothing.md"}))).json()
    assert missing["error"]["code"] == INVALID_PARAMS


# -- checks ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("frontmatter", "expected"),
    [
        (None, ["mcp_django.E190"]),  # no frontmatter block at all
        ("name: one\ndescription: [unclosed", ["mcp_django.E190"]),
        ("- a list", ["mcp_django.E190"]),
        (
            "name: one\ndescription: x\nreleased: 2026-01-01",
            ["mcp_django.E190"],
        ),  # a date JSON cannot carry
        ("name: other\ndescription: x", ["mcp_django.E191"]),
        ("description: x", ["mcp_django.E191"]),
        ("name: one", ["mcp_django.E192"]),
        ("name: one\ndescription: ''", ["mcp_django.E192"]),
        (f"name: one\ndescription: {'x' * 1025}", ["mcp_django.E192"]),
        ("name: one\ndescription: x\nmetadata:\n  n: 1", ["mcp_django.E193"]),
        (f"name: one\ndescription: x\ncompatibility: {'x' * 501}", ["mcp_django.E193"]),
        (
            "name: one\ndescription: x\nlicense: no",
            ["mcp_django.E193"],
        ),  # YAML 1.1's false, YAML 1.2's "no"
        ("name: one\ndescription: x\nallowed-tools: on", ["mcp_django.E193"]),
        (
            "name: one\ndescription: x\nmetadata:\n  io.modelcontextprotocol/x: y",
            ["mcp_django.W190"],
        ),
        ("name: one\ndescription: x\nversion: '2'", ["mcp_django.W190"]),
        ("name: one\ndescription: x\nlicense: MIT\nallowed-tools: search_books", []),
    ],
)
def test_check_reports_each_frontmatter_problem_with_its_id(
    tmp_path: Path, frontmatter: str | None, expected: list[str]
) -> None:
    folder = tmp_path / "one"
    if frontmatter is None:
        folder.mkdir()
        (folder / "SKILL.md").write_text("# No frontmatter\n")
    else:
        write_skill(tmp_path, "one", frontmatter)
    mcp = site_with(folder)
    messages = [m for m in check_skills() if m.obj is mcp.get_skill("one")]
    assert ids(messages) == expected
    assert all(m.hint for m in messages)


@pytest.mark.parametrize("name", ["Upper", "-lead", "trail-", "dou--ble", "x" * 65, "under_score"])
def test_check_refuses_names_against_the_naming_rules(tmp_path: Path, name: str) -> None:
    mcp = site_with(write_skill(tmp_path, name, f"name: {name}\ndescription: x"))
    assert ids([m for m in check_skills() if m.obj is mcp.get_skill(name)]) == ["mcp_django.E191"]


def test_manage_py_check_reports_a_broken_skill_as_start_up_does(tmp_path: Path) -> None:
    # The check is registered by the app's ready(), not only callable: runserver and migrate stop.
    folder = write_skill(tmp_path, "one", "name: other\ndescription: x")
    mcp = site_with(folder)  # kept alive: all_sites holds its sites weakly
    with pytest.raises(
        SystemCheckError, match=r"(?s)mcp_django\.E191.*'other' is not its folder's name 'one'"
    ) as raised:
        call_command("check")
    assert str(folder) in str(raised.value)
    del mcp


def test_check_reports_a_folder_without_skill_md(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    mcp = site_with(tmp_path / "empty")
    assert ids([m for m in check_skills() if m.obj is mcp.get_skill("empty")]) == [
        "mcp_django.E194"
    ]


def test_check_reports_too_many_files_and_too_many_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(skills, "MAX_RESOURCES", 2)
    monkeypatch.setattr(skills, "MAX_TOTAL_BYTES", 100)
    mcp = site_with(
        write_skill(tmp_path, "many", files={"a.md": "a", "b.md": "b"}),
        write_skill(tmp_path, "big", files={"a.bin": b"0" * 200}),
    )
    messages = check_skills()
    assert ids([m for m in messages if m.obj is mcp.get_skill("many")]) == ["mcp_django.E195"]
    assert ids([m for m in messages if m.obj is mcp.get_skill("big")]) == ["mcp_django.E196"]


def test_check_warns_of_an_app_folder_skill_hidden_by_an_earlier_app(tmp_path: Path) -> None:
    write_skill(tmp_path / "first" / "mcp_skills", "shared")
    write_skill(tmp_path / "second" / "mcp_skills", "shared")
    configs = [
        SimpleNamespace(path=str(tmp_path / "first"), label="first"),
        SimpleNamespace(path=str(tmp_path / "second"), label="second"),
    ]
    (warning,) = check_skills(configs)
    assert (
        warning.id == "mcp_django.W191"
        and "of app second is hidden by the one of app first" in warning.msg
    )


def test_the_example_site_skills_and_the_test_app_skill_pass_the_checks() -> None:
    example = Path(__file__).parents[1] / "example_site" / "library"
    configs = [
        SimpleNamespace(path=str(example), label="library"),
        SimpleNamespace(path=str(SKILLAPP), label="skillapp"),
    ]
    assert [s.name for s in skills.discover(configs)] == [
        "find-a-book",
        "lend-and-renew",
        "greet-readers",
    ]
    assert check_skills(configs) == []


def test_a_skill_that_cannot_be_served_is_logged_once_per_reason(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = write_skill(tmp_path, "one", "name: other\ndescription: x")
    skill = skills.Skill(folder)
    with caplog.at_level("WARNING", logger="mcp_django.extensions.skills"):
        assert skill.loaded() is None and skill.loaded() is None
        (folder / "SKILL.md").write_text("---\nname: one\n---\n")  # another reason: said again
        assert skill.loaded() is None
    assert [r.getMessage().split(": ", 1)[1] for r in caplog.records] == [
        "The skill name 'other' is not its folder's name 'one'.",
        "The skill description is missing, empty, not text or longer than 1024 characters.",
    ]


def _note(name: str) -> str:
    """A note."""
    return f"note {name}"


@override_settings(MCP_DJANGO=BASE_SETTINGS)
async def test_a_skill_uri_that_names_no_skill_is_left_to_the_other_resources(
    tmp_path: Path,
) -> None:
    mcp = site_with(write_skill(tmp_path, "one"))
    mcp.resource("skill://notes/{name}", name="notes")(_note)
    client = await client_for(mcp)
    (contents,) = (await client.call("resources/read", {"uri": "skill://notes/today"}))["contents"]
    assert contents["text"] == "note today"


@override_settings(MCP_DJANGO=BASE_SETTINGS)
async def test_subscriptions_are_taken_for_a_skills_files_only(tmp_path: Path) -> None:
    client = await client_for(site_with(write_skill(tmp_path, "one")))
    assert await client.call("resources/subscribe", {"uri": "skill://one/SKILL.md"}) == {}
    assert (await error_of(client, "resources/subscribe", {"uri": "skill://one/missing.md"}))[
        "code"
    ] == RESOURCE_NOT_FOUND
