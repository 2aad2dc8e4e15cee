"""Authentication policies for the MCP endpoint (``MCP_DJANGO["AUTHENTICATION"]``)."""
