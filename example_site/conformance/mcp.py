"""The fixed "everything" test surface the official MCP conformance suite expects.

Names, arguments and texts follow docs in /work/shared/conformance.md (and the upstream
reference servers), registered through the public API like any user's ``mcp.py``. The suite
only inspects a few properties of each answer; the texts match the references anyway so that
our own tests and a human comparing against the references see the same thing.
"""

from __future__ import annotations

import asyncio
import io
import json
import math
import struct
import wave
import zlib
from typing import Annotated, Any

from pydantic import Field

from mcp_django import (
    Audio,
    Context,
    EmbeddedResource,
    Image,
    Message,
    Text,
    ToolError,
    ToolResult,
    site,
)
from mcp_django.exceptions import InternalError


def _png_1x1() -> bytes:
    """Build a valid 1x1 opaque red PNG (signature, IHDR, IDAT, IEND with CRCs)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + kind
            + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        )

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # 1x1, 8-bit, truecolour, no interlace
    scanline = b"\x00\xff\x00\x00"  # filter type 0, then one RGB pixel
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(scanline))
        + chunk(b"IEND", b"")
    )


def _wav_tone(seconds: float = 0.05, rate: int = 8000, frequency: float = 440.0) -> bytes:
    """Build a short valid mono 16-bit PCM WAV holding a quiet sine tone."""
    frames = b"".join(
        struct.pack("<h", int(8000 * math.sin(2 * math.pi * frequency * i / rate)))
        for i in range(int(seconds * rate))
    )
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(frames)
    return buffer.getvalue()


# Built once at import: both are a few hundred bytes and never change.
PNG = _png_1x1()
WAV = _wav_tone()

# The suite's clients wait up to 200 ms after the call for trailing notifications; 50 ms
# between steps (as the references do) keeps the notifications distinct without slowing CI.
STEP_DELAY = 0.05


# -- tools ----------------------------------------------------------------------------------


# The labels hosted clients require (Claude's directory: a title and both hints on every tool):
# these tools only read or compute, but the few that change a list or pretend to delete.
READS = {"readOnlyHint": True, "destructiveHint": False}
ADDS = {"readOnlyHint": False, "destructiveHint": False}
DELETES = {"readOnlyHint": False, "destructiveHint": True}


@site.tool(name="test_simple_text", title="Simple text", annotations=READS)
def simple_text() -> str:
    """Return a simple text response."""
    return "This is a simple text response for testing."


@site.tool(name="test_image_content", title="Image content", annotations=READS)
def image_content() -> Image:
    """Return a 1x1 PNG image."""
    return Image(PNG, mime_type="image/png")


@site.tool(name="test_audio_content", title="Audio content", annotations=READS)
def audio_content() -> Audio:
    """Return a short WAV tone."""
    return Audio(WAV, mime_type="audio/wav")


@site.tool(name="test_embedded_resource", title="Embedded resource", annotations=READS)
def embedded_resource() -> EmbeddedResource:
    """Return an embedded text resource."""
    return EmbeddedResource(
        "test://embedded-resource",
        text="This is an embedded resource content.",
        mime_type="text/plain",
    )


@site.tool(name="test_multiple_content_types", title="Multiple content types", annotations=READS)
def multiple_content_types() -> ToolResult:
    """Return text, an image and an embedded resource in one result."""
    return ToolResult(
        content=[
            Text("Multiple content types test:"),
            Image(PNG, mime_type="image/png"),
            EmbeddedResource(
                "test://mixed-content-resource",
                text=json.dumps({"test": "data", "value": 123}, separators=(",", ":")),
                mime_type="application/json",
            ),
        ]
    )


async def _log_steps(ctx: Context, *messages: str) -> None:
    """Log each message at info, STEP_DELAY apart (the suites count them as they arrive)."""
    for index, message in enumerate(messages):
        if index:
            await asyncio.sleep(STEP_DELAY)
        await ctx.log.info(message)


@site.tool(name="test_tool_with_logging", title="Tool with logging", annotations=READS)
async def tool_with_logging(ctx: Context) -> str:
    """Send three log notifications while running."""
    await _log_steps(
        ctx, "Tool execution started", "Tool processing data", "Tool execution completed"
    )
    return "Tool with logging executed successfully"


@site.tool(name="test_tool_with_progress", title="Tool with progress", annotations=READS)
async def tool_with_progress(ctx: Context) -> str:
    """Report progress 0, 50 and 100 of 100 with the client's progress token."""
    await ctx.report_progress(0, 100)
    await asyncio.sleep(STEP_DELAY)
    await ctx.report_progress(50, 100)
    await asyncio.sleep(STEP_DELAY)
    await ctx.report_progress(100, 100)
    return f"Progress test completed (token: {ctx.progress_token!r})"


@site.tool(name="test_error_handling", title="Error handling", annotations=READS)
def error_handling() -> str:
    """Always fail with a tool error (isError result, not a protocol error)."""
    raise ToolError("This tool intentionally returns an error for testing")


def _result_text(result: Any) -> str:
    """Pull the text out of a CreateMessageResult (content is one block, or a list since 2025-11-25)."""
    content = result.get("content") if isinstance(result, dict) else None
    blocks = content if isinstance(content, list) else [content]
    texts = [b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
    return "".join(texts) or json.dumps(content)


@site.tool(name="test_sampling", title="Sampling", annotations=READS)
async def sampling(ctx: Context, prompt: str) -> str:
    """Ask the client's LLM to answer the prompt (sampling/createMessage)."""
    # Context refuses (isError) when the client lacks the capability, as the suite asks.
    result = await ctx.sample(
        messages=[{"role": "user", "content": {"type": "text", "text": prompt}}], max_tokens=100
    )
    return f"LLM response: {_result_text(result)}"


def _content_json(content: Any) -> str:
    return json.dumps(content, separators=(",", ":"))


@site.tool(name="test_elicitation", title="Elicitation", annotations=READS)
async def elicitation(ctx: Context, message: str) -> str:
    """Ask the user for a username and an email address (elicitation/create)."""
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    result = await ctx.elicit(message, schema)
    return f"User response: action={result.action}, content={_content_json(result.content)}"


@site.tool(
    name="test_elicitation_sep1034_defaults",
    title="Elicitation sep1034 defaults",
    annotations=READS,
)
async def elicitation_sep1034_defaults(ctx: Context) -> str:
    """Ask for one value of each primitive type, each with a default (SEP-1034)."""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {
                "type": "string",
                "description": "User status",
                "enum": ["active", "inactive", "pending"],
                "default": "active",
            },
            "verified": {"type": "boolean", "description": "Verification status", "default": True},
        },
        "required": [],
    }
    result = await ctx.elicit("Please review and update the form fields with defaults", schema)
    return f"Elicitation completed: action={result.action}, content={_content_json(result.content)}"


@site.tool(
    name="test_elicitation_sep1330_enums", title="Elicitation sep1330 enums", annotations=READS
)
async def elicitation_sep1330_enums(ctx: Context) -> str:
    """Ask for values in each of the five enum shapes of SEP-1330."""
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {
                "type": "string",
                "description": "Select one option",
                "enum": ["option1", "option2", "option3"],
            },
            "titledSingle": {
                "type": "string",
                "description": "Select one option with titles",
                "oneOf": [
                    {"const": "value1", "title": "First Option"},
                    {"const": "value2", "title": "Second Option"},
                    {"const": "value3", "title": "Third Option"},
                ],
            },
            "legacyEnum": {
                "type": "string",
                "description": "Select one option (legacy enumNames)",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {
                "type": "array",
                "description": "Select several options",
                "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
            },
            "titledMulti": {
                "type": "array",
                "description": "Select several options with titles",
                "items": {
                    "anyOf": [
                        {"const": "value1", "title": "First Choice"},
                        {"const": "value2", "title": "Second Choice"},
                        {"const": "value3", "title": "Third Choice"},
                    ]
                },
            },
        },
        "required": [],
    }
    result = await ctx.elicit("Please select options from the enum fields", schema)
    return f"Elicitation completed: action={result.action}, content={_content_json(result.content)}"


# Kept verbatim in tools/list: the pending json-schema-2020-12 scenario checks $schema, $defs
# and additionalProperties survive (SEP-1613) and, from the 0.2.0 alphas, that $anchor, allOf/anyOf
# and if/then/else survive too (SEP-2106), so the schema is given explicitly rather than derived.
# It is the suite's JSON_SCHEMA_2020_12_FIXTURE, key for key.
JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


@site.tool(
    name="json_schema_2020_12_tool",
    input_schema=JSON_SCHEMA_2020_12,
    title="Json schema 2020 12 tool",
    annotations=READS,
)
def json_schema_2020_12_tool(
    name: str | None = None,
    address: dict[str, Any] | None = None,
    contactMethod: str | None = None,  # property name fixed by the suite
    phone: str | None = None,
    email: str | None = None,
) -> str:
    """Echo arguments validated against a JSON Schema 2020-12 input schema ($defs, $ref, $anchor, allOf, if/then/else)."""
    arguments = {
        "name": name,
        "address": address,
        "contactMethod": contactMethod,
        "phone": phone,
        "email": email,
    }
    return f"JSON Schema 2020-12 tool called with: {_content_json({k: v for k, v in arguments.items() if v is not None})}"


@site.tool(name="test_reconnection", title="Reconnection", annotations=READS)
async def reconnection(ctx: Context) -> str:
    """Close the SSE stream mid-call; the result is delivered when the client resumes."""
    await ctx.close_stream()
    # Let the client see the close before the result exists, so the result really travels
    # through the event store and the Last-Event-ID replay rather than the first connection.
    await asyncio.sleep(0.1)
    return "Reconnection test completed successfully"


# -- MCP 2026-07-28 fixtures (conformance 0.2.0 alphas) ---------------------------------------
#
# Written once for both eras: in 2025-11-25 ctx.elicit()/sample()/list_roots() send requests to
# the client over the call's SSE stream; in 2026-07-28 the server turns the same awaits into an
# input-required result (resultType "input_required", inputRequests, requestState) and replays
# the tool when the client retries with inputResponses. docs/conformance-2026.md describes what
# each scenario sends and checks. key= names a question in inputRequests ("user_name", ...), as
# the scenarios expect; sessions ignore it.

ASK_NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
ASK_OK = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
ASK_COLOR = {"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]}
ASK_CONTEXT = {
    "type": "object",
    "properties": {"context": {"type": "string"}},
    "required": ["context"],
}


def _roots_text(roots: list[dict[str, Any]]) -> str:
    return ", ".join(str(r.get("uri")) for r in roots) or "(none)"


@site.tool(
    name="test_input_required_result_elicitation",
    title="Input required result elicitation",
    annotations=READS,
)
async def input_required_result_elicitation(ctx: Context) -> str:
    """Ask the user's name (one elicitation; inputRequests key "user_name" in 2026-07-28)."""
    answer = await ctx.elicit("What is your name?", ASK_NAME, key="user_name")
    name = (answer.content or {}).get("name", "") if answer.action == "accept" else ""
    return f"Hello, {name}!"


@site.tool(
    name="test_input_required_result_sampling",
    title="Input required result sampling",
    annotations=READS,
)
async def input_required_result_sampling(ctx: Context) -> str:
    """Ask the client's LLM one question (one sampling request; key "capital_question")."""
    result = await ctx.sample(
        "What is the capital of France?", max_tokens=100, key="capital_question"
    )
    return f"Sampling response: {_result_text(result)}"


@site.tool(
    name="test_input_required_result_list_roots",
    title="Input required result list roots",
    annotations=READS,
)
async def input_required_result_list_roots(ctx: Context) -> str:
    """Ask the client for its roots (one roots/list request; key "client_roots")."""
    roots = await ctx.list_roots(key="client_roots")
    return f"Client roots: {_roots_text(roots)}"


@site.tool(
    name="test_input_required_result_request_state",
    title="Input required result request state",
    annotations=READS,
)
async def input_required_result_request_state(ctx: Context) -> str:
    """Ask for a confirmation; the answer only counts with the requestState of the first round."""
    answer = await ctx.elicit("Please confirm", ASK_OK, key="confirm")
    ok = bool((answer.content or {}).get("ok")) if answer.action == "accept" else False
    # "state-ok" is what the scenario looks for; the server refuses a retry whose requestState
    # does not verify before the tool body runs again, so reaching this line means it verified.
    return f"state-ok: confirmed={str(ok).lower()}"


@site.tool(
    name="test_input_required_result_multiple_inputs",
    title="Input required result multiple inputs",
    annotations=READS,
)
async def input_required_result_multiple_inputs(ctx: Context) -> str:
    """Ask for a name, a greeting and the roots at once (three input requests in one round)."""
    # Concurrent awaits: in 2026-07-28 all three must land in ONE input-required result.
    answer, greeting, roots = await asyncio.gather(
        ctx.elicit("What is your name?", ASK_NAME, key="user_name"),
        ctx.sample("Generate a greeting", max_tokens=50, key="greeting"),
        ctx.list_roots(key="client_roots"),
    )
    name = (answer.content or {}).get("name", "") if answer.action == "accept" else ""
    return f"name={name}, greeting={_result_text(greeting)}, roots={_roots_text(roots)}"


@site.tool(
    name="test_input_required_result_multi_round",
    title="Input required result multi round",
    annotations=READS,
)
async def input_required_result_multi_round(ctx: Context) -> str:
    """Ask two questions one after the other (two rounds, keys "step1" then "step2")."""
    first = await ctx.elicit("Step 1: What is your name?", ASK_NAME, key="step1")
    second = await ctx.elicit("Step 2: What is your favorite color?", ASK_COLOR, key="step2")
    name = (first.content or {}).get("name", "")
    color = (second.content or {}).get("color", "")
    return f"{name} likes {color}"


@site.tool(
    name="test_input_required_result_tampered_state",
    title="Input required result tampered state",
    annotations=READS,
)
async def input_required_result_tampered_state(ctx: Context) -> str:
    """Ask for a confirmation; a retry with an altered requestState must be refused (-32602)."""
    answer = await ctx.elicit("Please confirm", ASK_OK, key="confirm")
    return f"Confirmed: {_content_json(answer.content)}"


@site.tool(
    name="test_input_required_result_capabilities",
    title="Input required result capabilities",
    annotations=READS,
)
async def input_required_result_capabilities(ctx: Context) -> str:
    """Ask only through what the client declared: elicitation if it can, sampling if it can."""
    capabilities = ctx.client_capabilities or {}
    parts = []
    if "elicitation" in capabilities:
        answer = await ctx.elicit("What is your name?", ASK_NAME, key="user_name")
        parts.append(f"name={(answer.content or {}).get('name', '')}")
    if "sampling" in capabilities:
        result = await ctx.sample("Say hello", max_tokens=50, key="greeting")
        parts.append(f"sampling={_result_text(result)}")
    return "Capabilities used: " + (", ".join(parts) or "none")


@site.tool(name="test_missing_capability", title="Missing capability", annotations=READS)
async def missing_capability(ctx: Context) -> str:
    """Needs the client's sampling capability; without it the call is refused (-32021 in 2026-07-28)."""
    result = await ctx.sample("Reply with OK", max_tokens=10)
    return f"Sampling response: {_result_text(result)}"


@site.tool(name="test_streaming_elicitation", title="Streaming elicitation", annotations=READS)
async def streaming_elicitation(ctx: Context) -> str:
    """Elicit while the call's response is streamed (2026-07-28: an input-required result, never a request)."""
    await ctx.report_progress(0, 1, "asking the user")
    answer = await ctx.elicit("What is your name?", ASK_NAME, key="user_name")
    return f"User response: action={answer.action}, content={_content_json(answer.content)}"


@site.tool(name="test_logging_tool", title="Logging tool", annotations=READS)
async def logging_tool(ctx: Context) -> str:
    """Log three messages; in 2026-07-28 they are sent only when the request set a logLevel."""
    await _log_steps(ctx, "Logging tool started", "Logging tool working", "Logging tool completed")
    return "Logging tool executed"


@site.tool(name="test_custom_header", title="Custom header", annotations=READS)
def custom_header(
    region: Annotated[
        str, Field(description="Where to run", json_schema_extra={"x-mcp-header": "Region"})
    ],
    query: str,
) -> str:
    """Echo a query and the region mirrored in the Mcp-Param-Region header (2026-07-28)."""
    return f"{query} in {region}"


@site.tool(name="test_trigger_tool_change", title="Trigger tool change", annotations=ADDS)
async def trigger_tool_change() -> str:
    """Tell every listener that the tool list changed (notifications/tools/list_changed)."""
    sent = await site.anotify_list_changed("tools")
    return f"tools/list_changed sent to {sent} listener(s)"


@site.tool(name="test_trigger_prompt_change", title="Trigger prompt change", annotations=ADDS)
async def trigger_prompt_change() -> str:
    """Tell every listener that the prompt list changed (notifications/prompts/list_changed)."""
    sent = await site.anotify_list_changed("prompts")
    return f"prompts/list_changed sent to {sent} listener(s)"


# -- resources ------------------------------------------------------------------------------


@site.resource("test://static-text", name="static-text", mime_type="text/plain")
def static_text() -> str:
    """A static text resource."""
    return "This is the content of the static text resource."


@site.resource("test://static-binary", name="static-binary", mime_type="image/png")
def static_binary() -> bytes:
    """A static binary resource (a 1x1 PNG)."""
    return PNG


@site.resource("test://watched-resource", name="watched-resource", mime_type="text/plain")
def watched_resource() -> str:
    """A resource clients may subscribe to."""
    return "Watched resource content"


@site.resource("test://template/{id}/data", name="template-data", mime_type="application/json")
def template_data(id: str) -> str:
    """Data for any ID, from a resource template."""
    return json.dumps(
        {"id": id, "templateTest": True, "data": f"Data for ID: {id}"}, separators=(",", ":")
    )


# -- prompts --------------------------------------------------------------------------------


@site.prompt(name="test_simple_prompt")
def simple_prompt() -> str:
    """A simple prompt without arguments."""
    return "This is a simple prompt for testing."


def _complete_arg1(value: str) -> list[str]:
    return [v for v in ("paris", "park", "party", "test", "testValue1") if v.startswith(value)]


@site.prompt(name="test_prompt_with_arguments", complete={"arg1": _complete_arg1})
def prompt_with_arguments(arg1: str, arg2: str) -> str:
    """A prompt with two required arguments."""
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@site.prompt(name="test_prompt_with_embedded_resource")
def prompt_with_embedded_resource(resourceUri: str) -> list[Message]:
    """A prompt that embeds the resource named by resourceUri."""
    return [
        Message(
            EmbeddedResource(
                resourceUri, text="Embedded resource content for testing.", mime_type="text/plain"
            )
        ),
        Message("Please process the embedded resource above."),
    ]


@site.prompt(name="test_prompt_with_image")
def prompt_with_image() -> list[Message]:
    """A prompt that includes an image."""
    return [Message(Image(PNG, mime_type="image/png")), Message("Please analyze the image above.")]


@site.prompt(name="test_input_required_result_prompt")
async def input_required_result_prompt(ctx: Context) -> str:
    """A prompt that first asks the user for its context (input-required on prompts/get in 2026-07-28)."""
    answer = await ctx.elicit(
        "What context should the prompt use?", ASK_CONTEXT, key="user_context"
    )
    context = (answer.content or {}).get("context", "") if answer.action == "accept" else ""
    return f"Use this context: {context}"


# -- The tasks extension (io.modelcontextprotocol/tasks, 2026-07-28; the tasks-* scenarios) -----
#
# A client that declares the extension on a tools/call of a task tool gets a task back at once
# (CreateTaskResult) and polls tasks/get; one that does not gets the result directly, or -32021
# for a task="required" tool. The task runs in this process by default, or in a worker when
# MCP_DJANGO["TASKS_BACKEND"] names one (docs/howto/tasks.md).

ASK_CONFIRM = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean"}},
    "required": ["confirm"],
}
ASK_NAME_AND_CONFIRM = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "confirm": {"type": "boolean"}},
}


@site.tool(name="greet", title="Greet", annotations=READS)
def greet(name: str) -> str:
    """Greet someone (a plain tool: never a task)."""
    return f"Hello, {name}!"


@site.tool(name="slow_compute", task="optional", title="Slow compute", annotations=READS)
async def slow_compute(seconds: Annotated[float, Field(ge=0, le=600)] = 1, label: str = "") -> str:
    """Work for `seconds` seconds, as a task when the client takes tasks (tasks/cancel stops it)."""
    await asyncio.sleep(seconds)
    return f"Computed {label or 'result'} in {seconds:g} s"


@site.tool(name="failing_job", task="required", title="Failing job", annotations=READS)
async def failing_job() -> str:
    """A job that always fails after about a second, with a tool error (isError): only as a task."""
    await asyncio.sleep(1)
    raise ToolError("The job failed: the input data is corrupt")


@site.tool(
    name="protocol_error_job", task="optional", title="Protocol error job", annotations=READS
)
async def protocol_error_job() -> str:
    """A job that ends in a protocol error (the task ends "failed", with the JSON-RPC error)."""
    await asyncio.sleep(0.2)
    raise InternalError("The job could not run: its backing service is down")


@site.tool(name="confirm_delete", task="optional", title="Confirm delete", annotations=DELETES)
async def confirm_delete(ctx: Context, filename: str) -> str:
    """Ask for confirmation while the task runs (input_required, answered with tasks/update)."""
    answer = await ctx.elicit(f"Delete {filename}?", ASK_CONFIRM, key="confirm_delete")
    if answer.action == "accept" and (answer.content or {}).get("confirm"):
        return f"Deleted {filename}"
    return f"Kept {filename}"


@site.tool(name="multi_input", task="optional", title="Multi input", annotations=READS)
async def multi_input(ctx: Context) -> str:
    """Ask two questions at once while the task runs; it goes on when both are answered."""
    first, second = await asyncio.gather(
        ctx.elicit("First: your name and confirmation", ASK_NAME_AND_CONFIRM, key="first"),
        ctx.elicit("Second: your name and confirmation", ASK_NAME_AND_CONFIRM, key="second"),
    )
    return f"first={_content_json(first.content)}, second={_content_json(second.content)}"


@site.tool(
    name="test_tool_with_task",
    task="required",
    prelude=True,
    title="Tool with task",
    annotations=READS,
)
async def tool_with_task(ctx: Context) -> str:
    """Ask the user's name in the request (an input-required round), then go on as a task."""
    answer = await ctx.elicit("What is your name?", ASK_NAME, key="user_name")
    name = (answer.content or {}).get("name", "") if answer.action == "accept" else ""
    await ctx.start_task()
    return f"Hello, {name}! (from the task)"
