from django.apps import AppConfig


class LiveConfig(AppConfig):
    name = "example_site.live"
    label = "live"
    verbose_name = "Live session demos"
