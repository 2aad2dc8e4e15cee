from django.apps import AppConfig


class DeskConfig(AppConfig):
    name = "tests.helpdesk.desk"
    label = "desk"
    default_auto_field = "django.db.models.BigAutoField"
