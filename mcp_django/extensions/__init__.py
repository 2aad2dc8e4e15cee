"""MCP extensions: capabilities a client asks for by name, beside the core protocol.

What lives here: tasks (``tasks/``: the runner that executes a task-augmented call, the store of
its rows and parked state), skills (``skills``: ``SKILL.md`` folders served as resources and by
the skills methods) and MCP Apps (``mcp_apps``: UI resources tools link to).

What it may import: the server's lower pieces (``context``, ``entries``, ``rounds``,
``notifications``), ``ops``, ``stores``, the foundations at the package root and the protocol
core. The engine and the handlers call into an extension; an extension never imports the
engine, the registry or a transport, and no extension imports another.
"""
