"""The version of mcp_django (also ``mcp_django.__version__``), and of the distribution:
pyproject.toml reads it from here."""

__version__ = "0.1.0"
