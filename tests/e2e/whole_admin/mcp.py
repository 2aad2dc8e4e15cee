from django.contrib import admin

from mcp_django import site

# No models=: everything admin.site registers, including mcp_django's own Session and Event
# (mcp_django/admin.py) and the accounts and OAuth models. Actions stay with the example's
# own register_admin() call, which already exposes them for its models.
site.register_admin(admin.site, actions=False)
