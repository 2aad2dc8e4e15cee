"""A real OpenID Connect provider on loopback: npm's ``oidc-provider`` (panva's, OpenID
certified), pinned, installed once into ``.oidc-provider/`` at the repository root as the
conformance suite is into ``.conformance/``, and run with ``idp/provider.mjs``.

Without npm the tests that need it are skipped, saying so; under ``CI=true`` they fail instead.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.asgi_servers import free_port

REPO = Path(__file__).resolve().parents[2]
INSTALL_DIR = REPO / ".oidc-provider"
PACKAGE = "oidc-provider"
VERSION = "9.13.3"
# oidc-provider 9 asks for Node 22 (it runs on 20, with a warning): the node@22 package brings
# one, as for the conformance suite; the machine's node is used when that did not install.
NODE_PACKAGE = "node@22"
MODULE = INSTALL_DIR / "node_modules" / PACKAGE / "lib" / "index.js"
SCRIPT = Path(__file__).with_name("idp") / "provider.mjs"
INSTALL_TIMEOUT = 480
START_TIMEOUT = 30.0
KEY_ID = "idp-1"


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: the OpenID Connect provider tests must run)")
    pytest.skip(reason)


def _installed_version() -> str | None:
    try:
        package = INSTALL_DIR / "node_modules" / PACKAGE / "package.json"
        return str(json.loads(package.read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


def _node_major(node: str) -> int:
    try:
        out = subprocess.run(
            [node, "--version"], capture_output=True, text=True, timeout=30, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    found = re.match(r"v(\d+)\.", out.strip())
    return int(found.group(1)) if found else 0


def node_binary() -> str:
    """Node 22 from the install folder, else the machine's node (20.19 or later runs it)."""
    local = INSTALL_DIR / "node_modules" / ".bin" / "node"
    if local.exists() and _node_major(str(local)) >= 22:
        return str(local)
    found = shutil.which("node")
    if found is None or _node_major(found) < 20:
        _unavailable("Node 20 or later is needed to run oidc-provider")
    return str(found)


def ensure_installed() -> None:
    """Install the pinned oidc-provider (and Node 22) into .oidc-provider/ unless it is there."""
    if _installed_version() == VERSION:
        return
    npm = shutil.which("npm")
    if npm is None:
        _unavailable("npm is not installed: it is needed once to install oidc-provider")
    INSTALL_DIR.mkdir(exist_ok=True)
    command = [
        str(npm),
        "install",
        "--prefix",
        str(INSTALL_DIR),
        "--no-audit",
        "--no-fund",
        f"{PACKAGE}@{VERSION}",
        NODE_PACKAGE,
    ]
    try:
        done = subprocess.run(
            command, cwd=INSTALL_DIR, capture_output=True, text=True, timeout=INSTALL_TIMEOUT
        )
    except subprocess.TimeoutExpired:
        _unavailable(f"npm install {PACKAGE}@{VERSION} did not finish in {INSTALL_TIMEOUT} s")
    if done.returncode != 0 or _installed_version() != VERSION:
        _unavailable(f"npm install {PACKAGE}@{VERSION} failed:\n{done.stdout}\n{done.stderr}")


@dataclass
class IdentityProvider:
    """The running provider: its issuer, and the private key it signs access tokens with."""

    issuer: str
    key: rsa.RSAPrivateKey
    log_path: Path

    @property
    def public_pem(self) -> bytes:
        return self.key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def sign(self, claims: dict[str, Any], **headers: Any) -> str:
        """A token signed with the provider's own key (what only the checks may refuse)."""
        return jwt.encode(
            claims, self.key, algorithm="RS256", headers={"kid": KEY_ID, "typ": "at+jwt", **headers}
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@contextmanager
def running_provider(log_path: Path) -> Iterator[IdentityProvider]:
    """oidc-provider on a free loopback port until the block ends."""
    ensure_installed()
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private_jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key))
    private_jwk.update(kid=KEY_ID, alg="RS256", use="sig")
    port = free_port()
    env = {
        **os.environ,
        "IDP_PORT": str(port),
        "IDP_JWKS": json.dumps({"keys": [private_jwk]}),
        "OIDC_PROVIDER_MODULE": str(MODULE),
    }
    provider = IdentityProvider(f"http://127.0.0.1:{port}", key, log_path)
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [node_binary(), str(SCRIPT)], env=env, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if process.poll() is not None:
                pytest.fail(f"oidc-provider exited with {process.returncode}:\n{provider.log()}")
            try:
                metadata = httpx.get(
                    f"{provider.issuer}/.well-known/openid-configuration", timeout=2
                )
                if metadata.status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"oidc-provider is not ready after {START_TIMEOUT}s:\n{provider.log()}")
            time.sleep(0.05)  # bounded by the deadline above
        yield provider
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
