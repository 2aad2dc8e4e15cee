"""The registry: registration rules, schemas from type hints, capabilities and autodiscovery.

Each test builds its own ``MCPSite()``; the global ``site`` is only read (autodiscover).
"""

from __future__ import annotations

from typing import Annotated, Any, Optional

import pytest
from django.core.exceptions import ImproperlyConfigured
from pydantic import BaseModel, Field

from mcp_django import Audio, Context, EmbeddedResource, Image, Text, site
from mcp_django.exceptions import AlreadyRegistered, NotRegistered
from mcp_django.protocol.dispatcher import dispatch
from mcp_django.protocol.errors import INVALID_PARAMS, METHOD_NOT_FOUND
from mcp_django.protocol.jsonrpc import Request
from mcp_django.registry.sites import MCPSite, all_sites


class Point(BaseModel):
    """A point on the plane."""

    x: int
    y: int = 0


class Opaque:
    """A type pydantic cannot describe in JSON Schema."""


def make_context(mcp_site: MCPSite) -> Context:
    return Context(site=mcp_site, request=None, user=None, session=None, request_id=1)


async def call(
    mcp_site: MCPSite, method: str, params: dict[str, Any] | None = None
) -> dict[str, Any]:
    return await dispatch(
        Request(1, method, params or {}), mcp_site.get_handlers(), make_context(mcp_site)
    )


# --- register / unregister ----------------------------------------------------------------


def test_register_tool_makes_it_registered():
    mcp = MCPSite()

    @mcp.tool
    def add(a: int, b: int) -> int:
        return a + b

    assert mcp.is_registered("tool", "add")
    assert mcp.get_tool("add").func is add


def test_tool_decorator_returns_the_function_unchanged():
    mcp = MCPSite()

    def add(a: int, b: int) -> int:
        return a + b

    assert mcp.tool(add) is add
    assert mcp.tool(name="plus")(add) is add
    assert mcp.is_registered("tool", "plus")


def test_register_duplicate_tool_raises_already_registered_naming_the_first():
    mcp = MCPSite()

    @mcp.tool(name="dup")
    def first() -> str:
        return "1"

    with pytest.raises(AlreadyRegistered) as exc:

        @mcp.tool(name="dup")
        def second() -> str:
            return "2"

    message = str(exc.value)
    assert "'dup'" in message
    assert (
        f"{__name__}.test_register_duplicate_tool_raises_already_registered_naming_the_first.<locals>.first"
        in message
    )


def test_register_duplicate_resource_uri_raises_already_registered():
    mcp = MCPSite()
    mcp.resource("test://a")(lambda: "a")
    with pytest.raises(AlreadyRegistered, match="test://a"):
        mcp.resource("test://a", name="other")(lambda: "b")


def test_same_name_may_be_a_tool_and_a_prompt():
    mcp = MCPSite()

    def hello() -> str:
        return "hi"

    mcp.tool(hello)
    mcp.prompt(hello)
    assert mcp.is_registered("tool", "hello") and mcp.is_registered("prompt", "hello")


def test_unregister_removes_the_entry_and_its_method():
    mcp = MCPSite()
    mcp.tool(lambda: "x", name="only")
    assert "tools/call" in mcp.get_handlers()
    mcp.unregister("tool", "only")
    assert not mcp.is_registered("tool", "only")
    assert "tools/call" not in mcp.get_handlers()


def test_unregistering_a_model_announces_the_tools_list_too(monkeypatch):
    from mcp_django.registry.options import ModelMCP
    from mcp_django.server import notifications
    from tests.testapp.models import Note

    announced = []
    monkeypatch.setattr(
        notifications, "announce_soon", lambda function, site, kind: announced.append(kind)
    )
    mcp = MCPSite(name="unregister-model")
    mcp.register(Note, type("NoteMCP", (ModelMCP,), {"tools": ["search"]}))
    mcp.serving = True
    mcp.unregister(Note)
    assert {"tools", "resources"} <= set(announced)  # its search tool went too


def test_unregister_unknown_raises_not_registered():
    with pytest.raises(NotRegistered, match="nope"):
        MCPSite().unregister("tool", "nope")


def test_sites_are_independent():
    one, two = MCPSite(), MCPSite()
    one.tool(lambda: "x", name="t")
    assert not two.is_registered("tool", "t")


def test_new_sites_are_in_all_sites():
    mcp = MCPSite(name="listed")
    assert mcp in all_sites


def test_site_urls_are_namespaced():
    patterns, app_name, namespace = MCPSite(name="other").urls
    assert app_name == "mcp_django"
    assert namespace == "other"
    assert [p.name for p in patterns] == [
        "endpoint",
        "sse",
        "messages",
        "elicit-secret",
        "elicit-confirm",
        "elicit-connect",
        "connect-callback",
        "health",
    ]


# --- names --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["has space", "comma,name", "", "x" * 129, "slash/name", "ünïcode"]
)
def test_invalid_tool_name_raises_improperly_configured(name):
    with pytest.raises(ImproperlyConfigured, match="tool name"):
        MCPSite().tool(lambda: "x", name=name)


def test_lambda_without_a_name_is_an_invalid_tool_name():
    with pytest.raises(ImproperlyConfigured):
        MCPSite().tool(lambda: "x")


@pytest.mark.parametrize("name", ["a", "get_user", "admin.tools.list", "DELETE-it", "x" * 128])
def test_valid_tool_names_are_accepted(name):
    mcp = MCPSite()
    mcp.tool(lambda: "x", name=name)
    assert mcp.is_registered("tool", name)


# --- schemas from type hints --------------------------------------------------------------


def test_schema_marks_parameters_without_default_as_required():
    mcp = MCPSite()

    @mcp.tool
    def search(query: str, limit: int = 10) -> list[str]:
        return []

    schema = mcp.get_tool("search").input_schema
    assert schema["type"] == "object"
    assert schema["required"] == ["query"]
    assert schema["properties"]["query"] == {"type": "string"}
    assert schema["properties"]["limit"] == {"type": "integer", "default": 10}


def test_schema_of_optional_parameter_allows_null():
    mcp = MCPSite()

    @mcp.tool
    def find(tag: Optional[str] = None) -> str:
        return tag or ""

    prop = mcp.get_tool("find").input_schema["properties"]["tag"]
    assert {"type": "null"} in prop["anyOf"]
    assert prop["default"] is None
    assert "required" not in mcp.get_tool("find").input_schema


def test_schema_takes_annotated_field_descriptions_and_constraints():
    mcp = MCPSite()

    @mcp.tool
    def page(number: Annotated[int, Field(description="Page number, from 1.", ge=1)] = 1) -> str:
        return ""

    prop = mcp.get_tool("page").input_schema["properties"]["number"]
    assert prop["description"] == "Page number, from 1."
    assert prop["minimum"] == 1


def test_schema_of_pydantic_model_parameter_references_its_definition():
    mcp = MCPSite()

    @mcp.tool
    def plot(point: Point) -> str:
        return ""

    schema = mcp.get_tool("plot").input_schema
    assert schema["properties"]["point"] == {"$ref": "#/$defs/Point"}
    assert schema["$defs"]["Point"]["required"] == ["x"]


def test_schema_forbids_unknown_arguments():
    mcp = MCPSite()
    mcp.tool(lambda a: a, name="t")
    assert mcp.get_tool("t").input_schema["additionalProperties"] is False


def test_tool_without_parameters_has_an_empty_object_schema():
    mcp = MCPSite()
    mcp.tool(lambda: "x", name="t")
    schema = mcp.get_tool("t").input_schema
    assert schema["type"] == "object"
    assert schema["properties"] == {}


def test_description_comes_from_the_docstring():
    mcp = MCPSite()

    @mcp.tool
    def documented() -> str:
        """First line.

        More text.
        """
        return ""

    assert mcp.get_tool("documented").description == "First line.\n\nMore text."


def test_context_parameter_is_left_out_of_the_schema():
    mcp = MCPSite()

    @mcp.tool
    async def work(ctx: Context, steps: int) -> str:
        return ""

    tool = mcp.get_tool("work")
    assert list(tool.input_schema["properties"]) == ["steps"]
    assert tool.input_schema["required"] == ["steps"]
    assert tool.streams is True


def test_tool_without_context_does_not_stream():
    mcp = MCPSite()
    mcp.tool(lambda a: a, name="t")
    assert mcp.get_tool("t").streams is False


def test_variadic_parameters_raise_improperly_configured():
    def spread(*args: int) -> int:
        return 0

    with pytest.raises(ImproperlyConfigured, match="args"):
        MCPSite().tool(spread)


def test_parameter_type_without_json_schema_raises_improperly_configured():
    def use(thing: Opaque) -> str:
        return ""

    with pytest.raises(ImproperlyConfigured, match="use"):
        MCPSite().tool(use)


def test_return_annotation_gives_an_output_schema_and_structured_content():
    mcp = MCPSite()

    @mcp.tool
    def origin() -> Point:
        return Point(x=0)

    tool = mcp.get_tool("origin")
    assert tool.definition()["outputSchema"]["required"] == ["x"]
    assert tool.to_result(Point(x=1))["structuredContent"] == {"x": 1, "y": 0}


def test_scalar_return_is_wrapped_as_result():
    mcp = MCPSite()

    @mcp.tool
    def count() -> int:
        return 3

    tool = mcp.get_tool("count")
    assert tool.output_schema["properties"]["result"] == {"type": "integer"}
    assert tool.to_result(3)["structuredContent"] == {"result": 3}


# --- sync and async functions -------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_sync_and_async_tools_are_both_called():
    mcp = MCPSite()

    @mcp.tool
    def sync_add(a: int, b: int) -> int:
        return a + b

    @mcp.tool
    async def async_add(a: int, b: int) -> int:
        return a + b

    for name in ("sync_add", "async_add"):
        response = await call(mcp, "tools/call", {"name": name, "arguments": {"a": 2, "b": 3}})
        assert response["result"]["structuredContent"] == {"result": 5}


async def test_tool_arguments_are_coerced_by_the_schema():
    mcp = MCPSite()

    @mcp.tool
    async def where(point: Point) -> str:
        assert isinstance(point, Point)
        return f"{point.x},{point.y}"

    response = await call(mcp, "tools/call", {"name": "where", "arguments": {"point": {"x": 4}}})
    assert response["result"]["content"] == [{"type": "text", "text": "4,0"}]


async def test_unknown_argument_is_a_tool_error():
    mcp = MCPSite()

    @mcp.tool
    async def one(a: int) -> int:
        return a

    response = await call(mcp, "tools/call", {"name": "one", "arguments": {"a": 1, "b": 2}})
    assert response["result"]["isError"] is True
    assert "b:" in response["result"]["content"][0]["text"]


async def test_context_is_passed_to_the_tool():
    mcp = MCPSite()
    seen: list[Any] = []

    @mcp.tool
    async def probe(ctx: Context) -> str:
        seen.append(ctx)
        return "ok"

    ctx = make_context(mcp)
    await dispatch(Request(1, "tools/call", {"name": "probe"}), mcp.get_handlers(), ctx)
    assert seen == [ctx]


# --- explicit input schemas ---------------------------------------------------------------


EXPLICIT = {
    "type": "object",
    "properties": {"query": {"type": "string", "minLength": 2}},
    "required": ["query"],
    "additionalProperties": False,
}


def test_explicit_input_schema_is_kept_verbatim():
    mcp = MCPSite()
    mcp.tool(lambda query: query, name="search", input_schema=EXPLICIT)
    assert mcp.get_tool("search").definition()["inputSchema"] == EXPLICIT
    assert EXPLICIT["properties"] == {"query": {"type": "string", "minLength": 2}}


async def test_explicit_input_schema_validates_arguments():
    mcp = MCPSite()

    async def search(query: str) -> str:
        return query.upper()

    mcp.tool(search, input_schema=EXPLICIT)
    ok = await call(mcp, "tools/call", {"name": "search", "arguments": {"query": "abc"}})
    assert ok["result"]["content"] == [{"type": "text", "text": "ABC"}]
    bad = await call(mcp, "tools/call", {"name": "search", "arguments": {"query": "a"}})
    assert bad["result"]["isError"] is True
    assert "query" in bad["result"]["content"][0]["text"]


def test_invalid_explicit_input_schema_raises_improperly_configured():
    with pytest.raises(ImproperlyConfigured, match="bad"):
        MCPSite().tool(lambda q: q, name="bad", input_schema={"type": 5})


def test_explicit_input_schema_must_describe_an_object():
    with pytest.raises(ImproperlyConfigured, match="object"):
        MCPSite().tool(lambda q: q, name="bad", input_schema={"type": "string"})


# --- resources and templates --------------------------------------------------------------


def test_resource_with_parameters_raises_improperly_configured():
    with pytest.raises(ImproperlyConfigured, match="template"):
        MCPSite().resource("test://fixed")(lambda item_id: item_id)


def test_template_variables_must_match_the_function():
    with pytest.raises(ImproperlyConfigured, match="variables"):
        MCPSite().resource("test://{a}/{b}")(lambda a: a)


def test_template_function_with_matching_variables_is_registered():
    mcp = MCPSite()
    mcp.resource("test://{a}/{b}", name="pair")(lambda a, b: a + b)
    template = mcp.get_resource_template("test://{a}/{b}")
    assert template.variables == ["a", "b"]
    assert template.match("test://x/y") == {"a": "x", "b": "y"}


def test_completer_for_unknown_template_variable_is_refused():
    with pytest.raises(ImproperlyConfigured, match="nope"):
        MCPSite().resource("test://{a}", complete={"nope": lambda v: []})(lambda a: a)


def test_completer_on_a_fixed_resource_is_refused():
    with pytest.raises(ImproperlyConfigured):
        MCPSite().resource("test://fixed", complete={"a": lambda v: []})(lambda: "x")


def test_completer_for_unknown_prompt_argument_is_refused():
    with pytest.raises(ImproperlyConfigured, match="nope"):
        MCPSite().prompt(lambda topic: topic, name="p", complete={"nope": lambda v: []})


def test_prompt_arguments_come_from_the_signature():
    mcp = MCPSite()

    @mcp.prompt
    def review(code: Annotated[str, Field(description="The code.")], style: str = "terse") -> str:
        return code

    assert mcp.get_prompt("review").arguments() == [
        {"name": "code", "required": True, "description": "The code."},
        {"name": "style", "required": False},
    ]


async def test_template_read_with_invalid_variable_is_invalid_params():
    mcp = MCPSite()
    mcp.resource("test://items/{item_id}", name="item")(lambda item_id: {"id": item_id})
    func = mcp.get_resource_template("test://items/{item_id}").func
    func.__annotations__["item_id"] = int
    mcp.unregister("template", "test://items/{item_id}")
    mcp.resource("test://items/{item_id}", name="item")(func)
    response = await call(mcp, "resources/read", {"uri": "test://items/abc"})
    assert response["error"]["code"] == INVALID_PARAMS
    assert response["error"]["data"] == {"uri": "test://items/abc"}


# --- capabilities -------------------------------------------------------------------------


def test_empty_site_offers_only_logging_and_completions():
    assert set(MCPSite().get_capabilities()) == {"logging", "completions"}


def test_capabilities_follow_registered_kinds():
    mcp = MCPSite()
    mcp.tool(lambda: "x", name="t")
    assert set(mcp.get_capabilities()) == {"logging", "completions", "tools"}
    mcp.resource("test://r")(lambda: "r")
    assert "resources" in mcp.get_capabilities()
    mcp.prompt(lambda: "p", name="p")
    assert "prompts" in mcp.get_capabilities()


def test_offered_capabilities_are_built_with_the_method_table_and_follow_registrations():
    mcp = MCPSite()
    mcp.tool(lambda: "x", name="t")
    assert set(mcp.offered_capabilities()) == {"logging", "completions", "tools"}
    # A registration resets the table, and what is declared with it.
    mcp.prompt(lambda: "p", name="p")
    assert "prompts" in mcp.offered_capabilities()
    mcp.unregister("prompt", "p")
    assert "prompts" not in mcp.offered_capabilities()
    # A copy: a caller that changes it changes nothing the next caller gets.
    mcp.offered_capabilities()["tools"] = {"changed": True}
    assert mcp.offered_capabilities()["tools"] == {"listChanged": True}


def test_offered_capabilities_honour_a_get_capabilities_override():
    class Quiet(MCPSite):
        def get_capabilities(self):
            return {
                key: value for key, value in super().get_capabilities().items() if key != "tools"
            }

    mcp = Quiet()
    mcp.tool(lambda: "x", name="t")
    # Declared and served agree: no tools capability, no tools methods.
    assert set(mcp.offered_capabilities()) == {"logging", "completions"}
    assert "tools/list" not in mcp.get_handlers()


def test_a_template_alone_offers_resources():
    mcp = MCPSite()
    mcp.resource("test://{a}", name="t")(lambda a: a)
    assert "resources" in mcp.get_capabilities()


@pytest.mark.parametrize(
    "method",
    [
        "tools/list",
        "tools/call",
        "resources/list",
        "resources/read",
        "resources/templates/list",
        "prompts/list",
        "prompts/get",
    ],
)
async def test_methods_of_absent_kinds_are_method_not_found(method):
    response = await call(MCPSite(), method)
    assert response["error"]["code"] == METHOD_NOT_FOUND


async def test_methods_of_present_kinds_are_served():
    mcp = MCPSite()
    mcp.tool(lambda: "x", name="t")
    response = await call(mcp, "tools/list")
    assert [t["name"] for t in response["result"]["tools"]] == ["t"]
    assert (await call(mcp, "prompts/list"))["error"]["code"] == METHOD_NOT_FOUND


# --- autodiscover -------------------------------------------------------------------------


def test_autodiscover_registered_the_test_apps_mcp_module():
    for kind, name in [
        ("tool", "add"),
        ("tool", "progress"),
        ("resource", "test://hello"),
        ("template", "test://items/{item_id}"),
        ("prompt", "explain"),
    ]:
        assert site.is_registered(kind, name), (kind, name)


def test_autodiscover_rolls_back_a_module_that_fails_halfway(tmp_path, monkeypatch):
    from django.utils.module_loading import autodiscover_modules

    mcp = MCPSite()
    mcp.tool(lambda: "kept", name="kept")
    package = tmp_path / "halfway_app"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "mcp.py").write_text(
        "from mcp_django.registry.sites import all_sites\n"
        "site = next(s for s in all_sites if s.name == 'rollback-target')\n"
        "site.tool(lambda: 'x', name='half')\n"
        "raise RuntimeError('broken mcp.py')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    mcp.name = "rollback-target"

    from django.apps import apps

    class FakeConfig:
        name = "halfway_app"
        module = __import__("halfway_app")

    monkeypatch.setattr(apps, "get_app_configs", lambda: [FakeConfig()])
    with pytest.raises(RuntimeError, match="broken"):
        autodiscover_modules("mcp", register_to=mcp)
    assert mcp.is_registered("tool", "kept")
    assert not mcp.is_registered("tool", "half")


def test_prompt_argument_type_without_json_schema_raises_improperly_configured():
    def use(thing: Opaque) -> str:
        return ""

    with pytest.raises(ImproperlyConfigured, match="use"):
        MCPSite().prompt(use)


async def test_return_value_not_matching_the_output_schema_is_a_tool_error():
    mcp = MCPSite()

    @mcp.tool
    def wrong() -> int:
        return "not a number"  # type: ignore[return-value]

    response = await call(mcp, "tools/call", {"name": "wrong"})
    assert response["result"]["isError"] is True
    assert "structuredContent" not in response["result"]


async def test_return_value_is_coerced_to_the_output_schema():
    mcp = MCPSite()

    @mcp.tool
    def counts() -> dict[str, int]:
        return {"a": 1}

    response = await call(mcp, "tools/call", {"name": "counts"})
    assert response["result"]["structuredContent"] == {"a": 1}


@pytest.mark.parametrize(
    ("value", "block"),
    [
        (
            Image(b"\x89PNG", mime_type="image/png"),
            {"type": "image", "data": "iVBORw==", "mimeType": "image/png"},
        ),
        (
            Audio(b"RIFF", mime_type="audio/wav"),
            {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"},
        ),
        (Text("hi"), {"type": "text", "text": "hi"}),
        (
            EmbeddedResource("test://x", text="t", mime_type="text/plain"),
            {
                "type": "resource",
                "resource": {"uri": "test://x", "mimeType": "text/plain", "text": "t"},
            },
        ),
    ],
)
def test_a_tool_returning_one_content_helper_answers_that_content_block(value, block):
    fresh = MCPSite()

    @fresh.tool()
    def give():
        return value

    assert fresh.get_tool("give").to_result(value) == {"content": [block]}


def test_the_default_site_without_mcp_django_installed_says_to_add_it() -> None:
    import subprocess
    import sys
    from pathlib import Path

    # What a project that forgot "mcp_django" in INSTALLED_APPS does first: include its URLs.
    script = (
        "from django.conf import settings\n"
        "settings.configure(INSTALLED_APPS=['django.contrib.contenttypes', 'django.contrib.auth'])\n"
        "import django; django.setup()\n"
        "import mcp_django.urls\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=Path(__file__).parent.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    last_line = result.stderr.strip().splitlines()[-1]
    assert last_line.startswith(
        "django.core.exceptions.ImproperlyConfigured: mcp_django is not in INSTALLED_APPS"
    )
    assert 'add "mcp_django" to INSTALLED_APPS' in last_line
    assert "LookupError" not in result.stderr
