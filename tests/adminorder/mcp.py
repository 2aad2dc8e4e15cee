from django.contrib import admin

from mcp_django import site

site.register_admin(admin.site)
