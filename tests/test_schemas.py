"""Generated schemas are JSON Schema 2020-12 whose patterns every client reads alike, for every
field Django ships and every tool of the example site, checked with a real validator, Python's
``re`` and a real ECMA-262 engine (``regress``, in Rust) with and without the u flag."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Annotated, Any

import orjson
import pytest
import regress
from asgiref.sync import sync_to_async
from django.contrib.admin.models import LogEntry
from django.contrib.auth.validators import ASCIIUsernameValidator, UnicodeUsernameValidator
from django.core import validators
from jsonschema import Draft202012Validator, FormatChecker
from pydantic import Field
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from mcp_django.protocol.ecma import ecma_pattern
from mcp_django.registry.options import ModelMCP
from mcp_django.registry.schemas import decimal_bound, ecma_patterns, nullable
from mcp_django.registry.sites import MCPSite, all_sites
from mcp_django.testing import MCPTestClient
from mcp_django.transport.consumers import MCPConsumer
from tests.conftest import make_user, mcp_settings_fixture
from tests.protocol.engines import compile_everywhere
from tests.testapp.models import Specimen, Tag

ALL_TOOLS = ["search", "get", "create", "update", "delete"]


def patterns(schema: Any) -> list[str]:
    """Every ``pattern`` in a schema (and every ``patternProperties`` key)."""
    found: list[str] = []
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "pattern" and isinstance(value, str):
                found.append(value)
            elif key == "patternProperties" and isinstance(value, dict):
                found.extend(value)
                found.extend(p for v in value.values() for p in patterns(v))
            elif key == "properties" and isinstance(value, dict):
                found.extend(p for v in value.values() for p in patterns(v))
            else:
                found.extend(patterns(value))
    elif isinstance(schema, list):
        for value in schema:
            found.extend(patterns(value))
    return found


def refs(schema: Any) -> list[str]:
    """Every ``$ref`` in a schema, at any depth."""
    if isinstance(schema, dict):
        own = [schema["$ref"]] if isinstance(schema.get("$ref"), str) else []
        return own + [ref for value in schema.values() for ref in refs(value)]
    if isinstance(schema, list):
        return [ref for value in schema for ref in refs(value)]
    return []


def assert_refs_resolve(schema: dict[str, Any]) -> None:
    """Every ``$ref`` points inside the schema document, as the official Python client resolves
    it (an empty registry: PointerToNowhere for a ``$defs`` left under a property), even those
    no result reaches."""
    resolver = Registry().resolver_with_root(DRAFT202012.create_resource(schema))
    for ref in refs(schema):
        resolver.lookup(ref)


CLIENT_FORMATS = FormatChecker()


@CLIENT_FORMATS.checks("regex", raises=(regress.RegressError, re.error, Warning))
def _is_client_regex(instance: object) -> bool:
    if isinstance(instance, str):
        compile_everywhere(instance)
    return True


def assert_valid_for_clients(schema: dict[str, Any]) -> None:
    """What the official clients need: a valid 2020-12 schema, every pattern a regex in every
    client's engine, and nothing in it that JSON cannot carry."""
    Draft202012Validator.check_schema(schema)
    # The metaschema says each "pattern" has format "regex": check them through every engine.
    Draft202012Validator.check_schema(schema, format_checker=CLIENT_FORMATS)
    for pattern in patterns(schema):
        compile_everywhere(pattern)  # the same, for patternProperties keys too
    assert_refs_resolve(schema)
    orjson.dumps(schema)
    assert "nullable" not in orjson.dumps(schema).decode()


def specimen_site() -> MCPSite:
    mcp = MCPSite(name="specimens")
    mcp.register(
        Specimen,
        type(
            "SpecimenMCP",
            (ModelMCP,),
            {"tools": ALL_TOOLS, "filter_fields": ["owner", "price", "integer", "day"]},
        ),
    )
    from django.contrib.auth import get_user_model

    mcp.register(
        get_user_model(),
        type("UserMCP", (ModelMCP,), {"tools": ALL_TOOLS, "exclude": ["password"]}),
    )
    return mcp


# -- the translation itself ---------------------------------------------------------------------

DJANGO_VALIDATORS = [
    validators.validate_slug,
    validators.validate_unicode_slug,
    validators.validate_ipv4_address,
    validators.validate_comma_separated_integer_list,
    validators.int_list_validator(sep=";", allow_negative=True),
    validators.URLValidator(),
    validators.EmailValidator(),
    UnicodeUsernameValidator(),
    ASCIIUsernameValidator(),
    validators.RegexValidator(r"\A[A-Z]{2}-\d{4}\Z"),
    validators.RegexValidator(r"^(?P<year>\d{4})-(?:\d{2})$"),
    validators.RegexValidator(r"^[]a]+$"),
    validators.RegexValidator(r"^{x}$"),
    validators.RegexValidator(r"\A(?P<year>\d{4})\-(?P<month>\d{2})\Z"),
    validators.RegexValidator(r"^a{,2}\@b\Z"),
    validators.RegexValidator(r"^[\w\-]+\Z", flags=re.ASCII),
    validators.RegexValidator(r"^x]\Z"),
]


def _regexes(validator: Any) -> list[re.Pattern[str]]:
    found = [getattr(validator, "regex", None)]
    for name in ("user_regex", "domain_regex", "literal_regex"):
        found.append(getattr(validator, name, None))
    return [r for r in found if isinstance(r, re.Pattern)]


# Ids by position: pytest-xdist's workers must collect the same ids (no id() in them).
@pytest.mark.parametrize(
    "validator",
    DJANGO_VALIDATORS,
    ids=[f"{type(v).__name__}{i}" for i, v in enumerate(DJANGO_VALIDATORS)],
)
def test_every_django_pattern_is_translated_exactly_or_left_out(validator: Any) -> None:
    samples = [
        "",
        "a",
        "ab-12",
        "AB-1234",
        "AB-1234\n",
        "héllo",
        "user.name+1@x",
        "1,2,3",
        "-1;2",
        "192.168.0.1",
        "2024-10",
        "]a",
        "{x}",
        "ok_slug",
        "名前",
        "x]",
        "@b",
        "aa@b",
        "aaa@b",
        "a-b_c",
        "é-e",
    ]
    for regex in _regexes(validator):
        translated = ecma_pattern(regex.pattern, regex.flags)
        if translated is None:
            continue
        ecma, ecma_u, python = compile_everywhere(translated)
        for text in samples:
            server = regex.search(text) is not None
            if text.endswith("\n"):
                # "$" also matches before a final newline in Python, not in ECMA-262, and \Z
                # has no spelling both read: a client may differ here, the server decides.
                continue
            assert server == (ecma.find(text) is not None) == (ecma_u.find(text) is not None), (
                regex.pattern,
                translated,
                text,
            )
            assert server == (python.search(text) is not None), (regex.pattern, translated, text)


def test_patterns_are_cleaned_everywhere_in_a_schema_but_property_names_are_left_alone() -> None:
    schema = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "pattern": r"^\w+\Z"},
            "code": {"anyOf": [{"type": "string", "pattern": r"\Ax\Z"}]},
        },
        "$defs": {"item": {"type": "array", "items": {"type": "string", "pattern": r"(?s)."}}},
    }
    cleaned = ecma_patterns(schema)
    assert cleaned["properties"]["pattern"] == {"type": "string"}
    assert cleaned["properties"]["code"]["anyOf"][0]["pattern"] == "^x$"
    assert cleaned["$defs"]["item"]["items"] == {"type": "string"}


def test_nullable_is_any_of_with_annotations_outside() -> None:
    assert nullable({"type": "string", "description": "d", "maxLength": 3}) == {
        "description": "d",
        "anyOf": [{"type": "string", "maxLength": 3}, {"type": "null"}],
    }
    assert nullable({"anyOf": [{"type": "number"}, {"type": "string"}]})["anyOf"][-1] == {
        "type": "null"
    }


def test_decimal_bounds_are_exact() -> None:
    assert decimal_bound(8, 2) == Decimal("999999.99")
    assert decimal_bound(5, 4) == Decimal("9.9999")
    assert decimal_bound(6, 0) == Decimal("999999")


# -- every field type, every tool ---------------------------------------------------------------


@pytest.mark.django_db
def test_every_generated_schema_of_every_field_type_is_valid_for_clients() -> None:
    mcp = specimen_site()
    tools = mcp.get_tools()
    assert len(tools) == 10
    for tool in tools:
        definition = tool.definition()
        assert_valid_for_clients(definition["inputSchema"])
        assert_valid_for_clients(definition["outputSchema"])
        assert (
            "a order" not in definition["description"]
            and " a " not in f" {definition['description']} "[:9]
        )


@pytest.mark.django_db
def test_every_registered_sites_schemas_are_valid_for_clients() -> None:
    # Every site registered in the test project (the example site's: tests/e2e/test_schemas_live.py).
    for mcp in list(all_sites):
        for tool in mcp.get_tools():
            definition = tool.definition()
            assert_valid_for_clients(definition["inputSchema"])
            if "outputSchema" in definition:
                assert_valid_for_clients(definition["outputSchema"])


@pytest.mark.django_db
def test_field_schemas_read_well() -> None:
    create = {t.name: t for t in specimen_site().get_tools()}[
        "testapp_specimen_create"
    ].definition()["inputSchema"]["properties"]
    # Nullable: anyOf with null, never a type array.
    assert create["char_null"]["anyOf"][-1] == {"type": "null"}
    assert all(not isinstance(s.get("type"), list) for s in create.values())
    # Decimal: a number or a numeric string, bounds exact.
    number, string = create["price"]["anyOf"][:2]
    assert number == {"type": "number", "minimum": -999999.99, "maximum": 999999.99}
    assert string["type"] == "string" and "multipleOf" not in str(create["price"])
    assert create["price"]["description"] == (
        "A decimal number from -999999.99 to 999999.99 with at most 2 decimal places, as a JSON number or a string."
    )
    assert "from 0 to 50.5 with at most 2" in create["discount"]["description"]
    assert create["discount"]["anyOf"][0] == {"type": "number", "minimum": 0, "maximum": 50.5}
    # Regex validators: ECMA-262 or left out (an inverse match cannot be a pattern).
    # (Both may be blank, and Django validates no empty value: "" is allowed.)
    assert create["code"]["pattern"] == r"(?:^[A-Z]{2}-\d{4}$)|^$"
    assert "pattern" not in create["username_like"]  # \w: Unicode letters in Python only
    assert create["ascii_name"]["pattern"] == r"(?:^[0-9A-Za-z_.@+-]+$)|^$"
    assert create["period"]["pattern"] == r"(?:^(?:\d{4})\x2d(?:\d{2})$)|^$"
    assert create["char"].get("pattern") is None
    assert create["bounded"]["minimum"] == 1 and create["bounded"]["maximum"] == 99
    assert create["data"] == {}  # any JSON value (DRF says "object", and a list would be refused)


def _specimen_validator(mcp: MCPSite, name: str) -> Draft202012Validator:
    schema = {t.name: t for t in mcp.get_tools()}[name].definition()["inputSchema"]
    return Draft202012Validator(schema, format_checker=FormatChecker())


@pytest.mark.django_db
def test_decimal_inputs_a_client_would_send_are_accepted_by_the_schema() -> None:
    validator = _specimen_validator(specimen_site(), "testapp_specimen_create")
    for price in (3.5, "3.50", 999999.99, "-999999.99", 0, "12"):
        assert validator.is_valid({"char": "x", "price": price}), price
    for price in (1000000, "1000000.00", "3.555", "abc", "1e3"):
        assert not validator.is_valid({"char": "x", "price": price}), price


@pytest.mark.django_db
def test_output_schemas_describe_stored_values_not_validators() -> None:
    """A row saved from code (or before a validator existed) must not make a client refuse
    the whole result: outputs carry types, not validators or choices."""
    specimen = Specimen.objects.create(
        char="x" * 80,
        slug="not a slug!",
        code="nope",
        char_choice="legacy",
        int_choice=7,
        bounded=500,
        email="not an email",
        url="not a url",
        ipv4="::1",
        period="x",
    )
    mcp = specimen_site()
    tool = {t.name: t for t in mcp.get_tools()}["testapp_specimen_get"]
    data = mcp._registry[Specimen].serialize(specimen)
    # Formats too: the TypeScript SDK's Ajv checks them (ajv-formats), and so does this checker.
    validator = Draft202012Validator(
        tool.definition()["outputSchema"], format_checker=FormatChecker()
    )
    assert not list(validator.iter_errors(data))
    assert data["upload"] is None


# -- calls: decimals, all errors at once, crafted cursors and filters, history ------------------


django_authentication = mcp_settings_fixture(
    AUTHENTICATION="django", SERVER_NAME="mcp-django-tests"
)


async def _client(user: Any, mcp: MCPSite) -> MCPTestClient:
    client = MCPTestClient(MCPConsumer.as_asgi(site=mcp))
    await client.force_login(user)
    await client.initialize()
    return client


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_channel_layer", "django_authentication")
async def test_a_decimal_given_as_number_or_string_is_stored_exactly() -> None:
    user = await sync_to_async(make_user)("ada", "add_specimen", "view_specimen")
    client = await _client(user, specimen_site())
    for price in (3.5, "3.50"):
        result = await client.call(
            "tools/call",
            {"name": "testapp_specimen_create", "arguments": {"char": "x", "price": price}},
        )
        assert not result.get("isError"), result
        assert result["structuredContent"]["price"] == "3.50"
    result = await client.call(
        "tools/call",
        {"name": "testapp_specimen_create", "arguments": {"char": "x", "price": "0.125"}},
    )
    assert result["isError"] and "price" in result["content"][0]["text"]
    assert await Specimen.objects.filter(price=Decimal("3.50")).acount() == 2


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_channel_layer", "django_authentication")
async def test_a_decimal_string_with_too_many_places_gets_django_s_words() -> None:
    user = await sync_to_async(make_user)("ada", "add_specimen", "view_specimen")
    client = await _client(user, specimen_site())
    result = await client.call(
        "tools/call",
        {
            "name": "testapp_specimen_create",
            "arguments": {"char": "x", "price": "3.555", "rate": "x"},
        },
    )
    assert result["isError"]
    assert result["content"][0]["text"] == (
        "Invalid arguments:\nprice: Ensure that there are no more than 2 decimal places.\nrate: A valid number is required."
    )
    # A search filter has no serializer to ask: the schema says what it expected.
    result = await client.call(
        "tools/call", {"name": "testapp_specimen_search", "arguments": {"price": "3.555"}}
    )
    assert result["isError"]
    assert (
        "price: '3.555' is not valid. Expected: A decimal number from -999999.99 to 999999.99"
        in result["content"][0]["text"]
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_channel_layer", "django_authentication")
async def test_a_pattern_with_named_groups_validates_on_the_server() -> None:
    # Written as ECMA-262's (?<year>...), the pattern broke Python's re in the server's own
    # argument check: -32603 and a traceback for any value.
    user = await sync_to_async(make_user)("ada", "add_specimen", "view_specimen")
    client = await _client(user, specimen_site())
    result = await client.call(
        "tools/call",
        {"name": "testapp_specimen_create", "arguments": {"char": "x", "period": "2024-10"}},
    )
    assert not result.get("isError"), result
    assert result["structuredContent"]["period"] == "2024-10"
    result = await client.call(
        "tools/call",
        {"name": "testapp_specimen_create", "arguments": {"char": "x", "period": "2024/10"}},
    )
    assert result["isError"] and result["content"][0]["text"].startswith(
        "Invalid arguments:\nperiod: "
    )


WRONG_VALUES = [{"x": 1}, [1], True, "x" * 300, 2**64 - 1, 1e300]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_channel_layer", "django_authentication")
@pytest.mark.parametrize("value", WRONG_VALUES, ids=lambda v: type(v).__name__)
async def test_a_wrong_value_in_every_field_is_reported_not_a_crash(
    value: Any, caplog: pytest.LogCaptureFixture
) -> None:
    user = await sync_to_async(make_user)("ada", "add_specimen", "view_specimen")
    client = await _client(user, specimen_site())
    fields = [
        name
        for name in Specimen._meta.get_fields()
        if getattr(name, "concrete", False) and name.name not in ("id", "created")
    ]
    arguments = {field.name: value for field in fields}
    result = await client.call(
        "tools/call", {"name": "testapp_specimen_create", "arguments": arguments}
    )
    assert result["isError"], result
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]
    assert not await Specimen.objects.aexists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_channel_layer", "django_authentication")
async def test_a_function_tool_reports_every_invalid_argument_in_one_answer() -> None:
    mcp = MCPSite(name="functions")

    def book(
        title: Annotated[str, Field(max_length=5)],
        copies: int,
        year: Annotated[str, Field(pattern=r"^(?P<y>\d{4})$")],
    ) -> str:
        return title

    mcp.tool(book)
    mcp.tool(
        lambda code, count: code,
        name="explicit",
        input_schema={
            "type": "object",
            "properties": {
                "code": {"type": "string", "maxLength": 2},
                "count": {"type": "integer"},
            },
            "required": ["code", "count"],
        },
    )
    assert (
        mcp.get_tool("book").definition()["inputSchema"]["properties"]["year"]["pattern"]
        == r"^(?:\d{4})$"
    )
    user = await sync_to_async(make_user)("ada")
    client = await _client(user, mcp)
    result = await client.call(
        "tools/call",
        {"name": "book", "arguments": {"title": "too long", "copies": "many", "year": "MMXXIV"}},
    )
    text = result["content"][0]["text"]
    assert result["isError"]
    for field in ("title", "copies", "year"):
        assert f"\n{field}: " in text, text
    result = await client.call(
        "tools/call", {"name": "explicit", "arguments": {"code": "long", "count": "x"}}
    )
    text = result["content"][0]["text"]
    assert result["isError"] and "\ncode: " in text and "\ncount: " in text, text


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_channel_layer", "django_authentication")
async def test_every_invalid_argument_is_reported_in_one_answer() -> None:
    user = await sync_to_async(make_user)("ada", "add_specimen", "view_specimen")
    client = await _client(user, specimen_site())
    # price breaks the schema; code breaks only a validator the schema cannot say; email both.
    arguments = {
        "char": "x",
        "price": 10**7,
        "code": "XA-1234",
        "email": "not-an-email",
        "bounded": 500,
    }
    result = await client.call(
        "tools/call", {"name": "testapp_specimen_create", "arguments": arguments}
    )
    text = result["content"][0]["text"]
    assert result["isError"]
    for field in ("price", "code", "email", "bounded"):
        assert f"{field}:" in text, text
    assert not await Specimen.objects.aexists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_channel_layer", "django_authentication")
@pytest.mark.parametrize(
    "arguments",
    [
        {"cursor": "eyJvIjogLTV9"},  # {"o": -5}
        {"cursor": "eyJvIjogMWUzMH0"},  # {"o": 1e30}
        {"cursor": "eyJwayI6IDFlMzB9"},  # {"pk": 1e30}
        {"cursor": "eyJwayI6IFtdfQ"},  # {"pk": []}
        {"cursor": "not base64 at all!"},
        {"cursor": "aGVsbG8"},  # base64 of "hello": not JSON
        {"cursor": "WzFd"},  # [1]: not an object
        {"cursor": "eyJvIjogIngifQ"},  # {"o": "x"}
        {"cursor": "eyJvIjogdHJ1ZX0"},  # {"o": true}
        {"cursor": 5},
        {"owner": 1e30},
        {"owner": 2**64 - 1},  # past the signed 64-bit range every database column has
        {"integer": 1.5},
        {"day": "yesterday"},
    ],
)
async def test_a_crafted_cursor_or_filter_is_an_error_result_not_a_crash(
    arguments: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    user = await sync_to_async(make_user)("ada", "view_specimen")
    client = await _client(user, specimen_site())
    result = await client.call(
        "tools/call", {"name": "testapp_specimen_search", "arguments": arguments}
    )
    assert result["isError"], result
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_channel_layer", "django_authentication")
async def test_an_offset_cursor_pages_and_a_forged_one_is_refused() -> None:
    user = await sync_to_async(make_user)("ada", "view_specimen")
    await Specimen.objects.abulk_create([Specimen(char=f"s{i}") for i in range(3)])
    mcp = MCPSite(name="offsets")
    mcp.register(
        Specimen,
        type("SpecimenMCP", (ModelMCP,), {"tools": ["search"], "ordering": ["owner__username"]}),
    )
    client = await _client(user, mcp)
    first = await client.call(
        "tools/call", {"name": "testapp_specimen_search", "arguments": {"limit": 2}}
    )
    cursor = first["structuredContent"]["nextCursor"]
    second = await client.call(
        "tools/call",
        {"name": "testapp_specimen_search", "arguments": {"limit": 2, "cursor": cursor}},
    )
    assert len(second["structuredContent"]["items"]) == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_channel_layer", "django_authentication")
async def test_get_with_an_out_of_range_pk_is_an_invalid_argument() -> None:
    # No row can have it, like "not-a-uuid" for a UUID key: the caller is told what is wrong.
    user = await sync_to_async(make_user)("ada", "view_specimen")
    client = await _client(user, specimen_site())
    result = await client.call(
        "tools/call", {"name": "testapp_specimen_get", "arguments": {"pk": 1e30}}
    )
    assert result["isError"]
    assert (
        result["content"][0]["text"]
        == "Invalid arguments:\npk: Ensure this value is less than or equal to 9223372036854775807."
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_channel_layer", "django_authentication")
async def test_an_update_that_changes_nothing_writes_no_history() -> None:
    user = await sync_to_async(make_user)("ada", "change_specimen", "view_specimen")
    tag = await Tag.objects.acreate(slug="red")
    specimen = await Specimen.objects.acreate(char="same", price=Decimal("1.50"))
    await specimen.tags.aset([tag])
    client = await _client(user, specimen_site())
    same = {"pk": specimen.pk, "char": "same", "price": "1.5", "tags": ["red"]}
    result = await client.call("tools/call", {"name": "testapp_specimen_update", "arguments": same})
    assert not result.get("isError"), result
    assert not await LogEntry.objects.aexists()
    result = await client.call(
        "tools/call", {"name": "testapp_specimen_update", "arguments": {**same, "char": "new"}}
    )
    entry = await LogEntry.objects.aget()
    assert entry.change_message == "Changed char through MCP."


def test_primary_keys_travel_as_their_json_type() -> None:
    from mcp_django.registry.schemas import pk_json_type
    from tests.testapp.models import Note

    assert pk_json_type(Note) == "integer"
    assert pk_json_type(Tag) == "string"  # a slug primary key


def test_a_primary_key_schema_says_the_type_format_and_bounds_of_the_key() -> None:
    from mcp_django.registry.schemas import pk_schema
    from tests.testapp.models import Note, Ticket

    assert pk_schema(Note) == {"type": "integer"}  # a BigAutoField
    assert pk_schema(Ticket) == {"type": "string", "format": "uuid"}
    assert pk_schema(Tag) == {"type": "string", "maxLength": 50, "pattern": "^[-a-zA-Z0-9_]+$"}


def test_a_relation_to_a_uuid_keyed_model_says_the_keys_format() -> None:
    from rest_framework import serializers

    from mcp_django.registry.schemas import FieldSchemas
    from tests.testapp.models import Note, Ticket

    def schema(model: Any) -> dict[str, Any]:
        return FieldSchemas().field_schema(
            serializers.PrimaryKeyRelatedField(queryset=model.objects.all())
        )

    assert (schema(Ticket)["type"], schema(Ticket)["format"]) == ("string", "uuid")
    assert schema(Tag)["type"] == "string" and schema(Tag)["pattern"]  # a slug
    assert schema(Note)["type"] == "integer"


# ISO 8601 durations as RFC 3339's appendix A writes them (with fractional seconds, which
# Django writes for microseconds); jsonschema checks "duration" only with isoduration installed.
ISO_DURATION = re.compile(
    r"\AP(?!\Z)(\d+Y)?(\d+M)?(\d+W)?(\d+D)?(T(?=\d)(\d+H)?(\d+M)?(\d+(\.\d+)?S)?)?\Z"
)


def _duration_checker() -> FormatChecker:
    checker = FormatChecker()
    checker.checks("duration")(
        lambda value: not isinstance(value, str) or bool(ISO_DURATION.match(value))
    )
    return checker


@pytest.mark.django_db
def test_a_duration_is_written_as_iso_8601_as_its_output_schema_says() -> None:
    import datetime

    specimen = Specimen.objects.create(
        char="x", duration=datetime.timedelta(days=1, hours=2, seconds=1.5)
    )
    mcp = specimen_site()
    schema = {t.name: t for t in mcp.get_tools()}["testapp_specimen_get"].definition()[
        "outputSchema"
    ]
    data = mcp._registry[Specimen].serialize(specimen)
    assert {"type": "string", "format": "duration"} in schema["properties"]["duration"]["anyOf"]
    assert not list(
        Draft202012Validator(schema, format_checker=_duration_checker()).iter_errors(data)
    )
    assert data["duration"] == "P1DT02H00M01.500000S"


@pytest.mark.django_db
def test_an_iso_8601_duration_argument_is_accepted_and_stored() -> None:
    import datetime

    from django.contrib.auth.models import User
    from django.test import RequestFactory

    schema = _specimen_validator(specimen_site(), "testapp_specimen_create").schema
    assert {"type": "string", "format": "duration"} in schema["properties"]["duration"]["anyOf"]
    assert Draft202012Validator(schema, format_checker=_duration_checker()).is_valid(
        {"char": "x", "duration": "P1DT2H"}
    )
    tool = {t.name: t for t in specimen_site().get_tools()}["testapp_specimen_create"]
    request = RequestFactory().post("/")
    request.user = User.objects.create_superuser("root", "root@example.com", "x")
    for given in ("P1DT2H", "1 02:00:00"):  # ISO 8601, and Django's own form as before
        result = tool._call({"char": given, "duration": given}, request)
        assert not result.get("isError"), result
        assert result["structuredContent"]["duration"] == "P1DT02H00M00S"
    assert set(Specimen.objects.values_list("duration", flat=True)) == {
        datetime.timedelta(days=1, hours=2)
    }
    wrong = tool._call({"char": "x", "duration": "two days"}, request)
    assert "duration: Duration has wrong format. Use ISO 8601" in wrong["content"][0]["text"]
