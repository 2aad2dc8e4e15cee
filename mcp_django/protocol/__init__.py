"""The sans-I/O MCP core: framing, negotiation, SSE, lifecycle and dispatch.

Nothing here imports Django, Channels or asgiref (``tests/protocol/test_boundary.py`` checks).
"""
