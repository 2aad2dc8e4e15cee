"""Encryption of per-user secrets at rest, with keys derived from settings.

Fernet (AES-128-CBC + HMAC-SHA256, from the well-reviewed ``cryptography`` package) with keys
derived by HKDF from ``MCP_DJANGO["SECRETS_KEYS"]`` or, by default, ``SECRET_KEY`` and its
fallbacks, so rotating ``SECRET_KEY`` the Django way keeps old secrets readable.
"""

from __future__ import annotations

import base64

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

from .conf import mcp_settings

__all__ = ["InvalidToken", "decrypt", "encrypt"]


def _derive(material: str) -> Fernet:
    key = HKDF(
        algorithm=hashes.SHA256(), length=32, salt=b"mcp_django.secrets", info=b"fernet"
    ).derive(material.encode("utf-8"))
    return Fernet(base64.urlsafe_b64encode(key))


def _fernet() -> MultiFernet:
    materials = list(mcp_settings.secrets_keys or []) or [
        settings.SECRET_KEY,
        *getattr(settings, "SECRET_KEY_FALLBACKS", []),
    ]
    # The first key encrypts; every key decrypts (rotation).
    return MultiFernet([_derive(m) for m in materials])


def encrypt(plaintext: str) -> str:
    return _fernet().encrypt(plaintext.encode("utf-8")).decode("ascii")


def decrypt(ciphertext: str) -> str:
    """Decrypt a value made by :func:`encrypt`; raise ``InvalidToken`` if no key fits."""
    return _fernet().decrypt(ciphertext.encode("ascii")).decode("utf-8")
