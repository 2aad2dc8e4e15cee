"""The bench surface, identical to bench/reference_server.py; autodiscovered like admin.py."""

from mcp_django import site


@site.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@site.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@site.resource("bench://hello", name="hello", mime_type="text/plain")
def hello() -> str:
    return "Hello, bench!"
