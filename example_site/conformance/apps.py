from django.apps import AppConfig


class ConformanceConfig(AppConfig):
    name = "example_site.conformance"
    label = "conformance"
    verbose_name = "MCP conformance test surface"
