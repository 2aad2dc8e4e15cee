"""Modules written as a tool author writes them, type-checked by ``tests/test_typing.py``
under ``mypy --strict`` with django-stubs. They are never imported by the tests."""
