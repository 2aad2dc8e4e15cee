"""An installed app whose MCP registrations sit in a module autodiscovery never imports
(system check W182). Nothing may import ``mcp_tools``: the check looks for it unloaded."""
