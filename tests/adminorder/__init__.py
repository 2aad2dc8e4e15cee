"""An app whose ``admin.py`` registers a model and whose ``mcp.py`` bridges the admin site: with
``mcp_django`` listed before ``django.contrib.admin``, mcp.py runs before admin.py."""
