"""The server: the transport-neutral engine that answers MCP messages.

What lives here: the engine every transport hands its messages to (``engine``), the method
handlers (``handlers``), what a tool sees while it runs (``context``: ``Context``, logging,
progress, elicitation and sampling), the questions a 2026-07-28 request puts back to the client
(``rounds``) and their sealed state (``request_state``), the protocols every tool, resource and
prompt implements with the one gate that decides who may see and call them (``entries``), the
base of the tools the server makes for itself (``handler_tools``), the bus of change
notifications (``notifications``), the bridge from Python logging to the client
(``log_bridge``), who a message comes from (``principal``) and the content helpers tools return
(``content``).

What it may import: the protocol core, the foundations at the package root (``conf``,
``exceptions``, ``signals``, ``models``, ``db``, ``crypto``), ``stores``, ``auth``, the channel
layer plumbing of ``transport`` (``layers``, ``streams``, ``process``), ``ops`` and
``extensions``. Never the registry (a site reaches the engine as the ``ServedSite`` protocol of
``entries``), the HTTP transports or the integrations at the root.
"""
