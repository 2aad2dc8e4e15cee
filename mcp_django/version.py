"""The version of mcp_django (also ``mcp_django.__version__``)."""

__version__ = "0.1.0"
