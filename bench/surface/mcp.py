"""The bench surface, identical to bench/reference_server.py; autodiscovered like admin.py."""

from mcp_django import Context, site

# Bounds the one client-controlled size: the notify case asks for 100 per call.
MAX_NOTIFICATIONS = 10_000


@site.tool()
async def echo(text: str) -> str:
    """Echo the text back."""
    return text


@site.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@site.tool()
async def notify(ctx: Context, count: int) -> str:
    """Send `count` log notifications on the request's stream, then answer."""
    if not 0 <= count <= MAX_NOTIFICATIONS:
        raise ValueError(f"count must be between 0 and {MAX_NOTIFICATIONS}")
    for i in range(count):
        await ctx.log.info({"i": i})
    return f"sent {count}"


@site.resource("bench://hello", name="hello", mime_type="text/plain")
def hello() -> str:
    return "Hello, bench!"
