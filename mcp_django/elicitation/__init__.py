"""URL-mode elicitation: pages on this Django site for what must never pass through the MCP
client (API keys for other services, confirmations of destructive actions, third-party logins).
"""
