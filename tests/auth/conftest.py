"""Fixtures shared by the fuzzing of the signed-JWT policies (JWT access tokens, ID-JAGs)."""

from __future__ import annotations

import pytest

from mcp_django.auth import signed
from mcp_django.auth.jwks import KeyStore

from . import strategies as s
from .test_external import Clock


@pytest.fixture
def published_store(monkeypatch: pytest.MonkeyPatch) -> KeyStore:
    """The key store every signed-JWT check reads, serving ``strategies``' published keys."""
    documents = {s.JWKS_URI: s.published_keys()}
    fresh = KeyStore(fetch=lambda url: documents[url], clock=Clock())
    monkeypatch.setattr(signed, "key_store", fresh)
    return fresh
