from django.apps import AppConfig


class MonitorConfig(AppConfig):
    name = "tests.cronsite.monitor"
    label = "monitor"
    default_auto_field = "django.db.models.BigAutoField"
