from django.apps import AppConfig


class LibraryConfig(AppConfig):
    name = "example_site.library"
    label = "library"
    verbose_name = "Library"
