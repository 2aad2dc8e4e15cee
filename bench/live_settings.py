"""bench/live.py: the bench settings plus the live surface (notification bursts)."""

from bench.oursite.settings import *  # noqa: F401,F403
from bench.oursite.settings import INSTALLED_APPS as _APPS

INSTALLED_APPS = [*_APPS, "bench.live_surface"]
