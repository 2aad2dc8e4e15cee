"""The registry: what a project registers and how it becomes MCP tools, resources and prompts.

What lives here: ``MCPSite``, the registry a project fills as it fills the admin (``sites``),
what a site serves from it (its entry lists, capabilities and method table: ``serving``),
``ModelMCP``, the options of a registered model (``options``), plain functions as tools,
resources and prompts (``functions``), admin actions as tools (``admin_bridge``), the JSON
Schemas generated from model fields (``schemas``), and what a change to a registered model
means for the clients watching it (``changes``).

What it may import: ``server`` (the entries it builds, the engine a site serves through),
``extensions``, ``ops``, ``stores``, the foundations at the package root and the protocol core.
Never ``transport`` (but for the stream plumbing a change notification travels on) or the
integrations at the root (the URL patterns and views reach the site, not the other way round).
"""
