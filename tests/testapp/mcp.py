"""Autodiscovered registrations used by the tests."""

from __future__ import annotations

from mcp_django import Context, ToolError, site

from .models import Note


@site.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@site.tool()
async def echo(text: str) -> str:
    """Echo the text back."""
    return text


@site.tool()
def fail(message: str = "boom") -> str:
    """Always fail with a ToolError."""
    raise ToolError(message)


@site.tool()
def crash() -> str:
    """Raise an unexpected exception."""
    raise RuntimeError("secret internal detail")


@site.tool()
async def progress(ctx: Context, steps: int = 3) -> str:
    """Report progress and log while working."""
    for i in range(steps):
        await ctx.log.info(f"step {i + 1}")
        await ctx.report_progress(i + 1, steps)
    return f"done {steps}"


@site.tool()
async def reconnect(ctx: Context) -> str:
    """Close the SSE connection mid-call; the result arrives on resume."""
    await ctx.log.info("before close")
    await ctx.close_stream()
    await ctx.log.info("after close")
    return "resumed"


@site.tool(scopes=["notes:write"])
def scoped_write(text: str) -> str:
    """A tool that needs the notes:write OAuth scope."""
    return f"wrote {text}"


@site.resource("test://hello", name="hello", mime_type="text/plain")
def hello() -> str:
    """A greeting."""
    return "Hello!"


@site.resource(
    "test://items/{item_id}",
    name="item",
    complete={"item_id": lambda value: [v for v in ("1", "2", "12") if v.startswith(value)]},
)
def item(item_id: int) -> dict:
    """One item by id."""
    return {"id": item_id}


@site.prompt(
    complete={"topic": lambda value: [t for t in ("django", "databases") if t.startswith(value)]}
)
def explain(topic: str, level: str = "beginner") -> str:
    """Explain a topic."""
    return f"Explain {topic} at {level} level."


@site.tool()
async def ask(ctx: Context, question: str) -> str:
    """Ask the client's LLM, then the user."""
    sampled = await ctx.sample(question, max_tokens=50)
    answer = await ctx.elicit(
        "Confirm?",
        {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
    )
    return f"{sampled['content']['text']} / {answer.action} {answer.content}"


from mcp_django import ModelMCP  # noqa: E402


@site.register(Note)
class NoteMCP(ModelMCP):
    fields = ["title", "body", "priority", "owner"]
    read_only_fields = ["owner"]
    search_fields = ["title", "body"]
    ordering = ["title", "-title"]
    filter_fields = ["priority"]
    tools = ["search", "get", "create", "update", "delete"]

    def get_queryset(self, request):
        # Row-level: a user sees only their own notes.
        return super().get_queryset(request).filter(owner_id=getattr(request.user, "pk", None))

    def get_serializer_class(self):
        base = super().get_serializer_class()

        class NoteSerializer(base):  # type: ignore[misc,valid-type]
            def create(self, validated_data):
                validated_data["owner"] = self.context["request"].user
                return super().create(validated_data)

        return NoteSerializer


@site.tool()
async def weather(ctx: Context, city: str) -> str:
    """Use the user's weather-service key, asking for it on a page the first time."""
    key = await ctx.require_secret(
        "weather", "Connect your weather service: enter its API key.", label="Weather"
    )
    # A real tool would call the service with the key; it never returns the key itself.
    return f"Sunny in {city} (key of {len(key)} characters used)"


@site.tool()
async def purge_notes(ctx: Context) -> str:
    """Delete all of the user's notes, after they confirm on a page."""
    elicitation = await ctx.elicit_url(
        "Delete all your notes? This cannot be undone.",
        params={"summary": "All notes will be deleted."},
    )
    if elicitation.action != "accept":
        return "Kept: the user did not open the page."
    state = await ctx.wait_for_elicitation(elicitation, timeout=10)
    if state != "completed":
        return f"Kept ({state})."
    deleted, _ = await Note.objects.filter(owner_id=ctx.user.pk).adelete()
    return f"Deleted {deleted} notes."


@site.tool()
async def remember(ctx: Context, key: str, value: str) -> dict:
    """Keep a value for this user and for this session."""
    await ctx.user_state.set(key, value)
    await ctx.session_state.set(key, value)
    return {"user": await ctx.user_state.items(), "session": await ctx.session_state.items()}


@site.tool()
async def recall(ctx: Context, key: str) -> dict:
    """Read what remember() kept."""
    return {"user": await ctx.user_state.get(key), "session": await ctx.session_state.get(key)}
