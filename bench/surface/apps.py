from django.apps import AppConfig


class BenchSurfaceConfig(AppConfig):
    name = "bench.surface"
    label = "bench_surface"
    verbose_name = "Bench surface"
