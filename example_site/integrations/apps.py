from django.apps import AppConfig


class IntegrationsConfig(AppConfig):
    name = "example_site.integrations"
    label = "integrations"
    verbose_name = "Integrations (URL elicitation, secrets, per-user state)"
