"""Test-only app: bridges the whole example admin site, as the README once showed it."""
