from django.apps import AppConfig


class LiveSurfaceConfig(AppConfig):
    name = "bench.live_surface"
    label = "bench_live_surface"
