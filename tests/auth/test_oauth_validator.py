"""Why the example site refuses a client ID metadata document, in words safe to show anyone.

DOT raises ``CIMDError`` with the resolved address or the network error in its text and only
logs it; the example's fetcher keeps a public reason for the page and ``error_description``.
The refusals below are DOT's own, raised by its real fetcher where no network is needed.
"""

from __future__ import annotations

import socket
from typing import Any

import pytest
from django.core.cache import cache
from oauth2_provider.cimd import CIMDError

from example_site.accounts.oauth import MetadataFetcher, _refusal_key, public_reason


def refusal(client_id: str) -> tuple[str, str]:
    """DOT's message and the reason the example keeps for ``client_id``."""
    cache.delete(_refusal_key(client_id))
    with pytest.raises(CIMDError) as caught:
        MetadataFetcher().fetch(client_id)
    return str(caught.value), cache.get(_refusal_key(client_id))


def test_a_private_address_is_named_as_such_without_the_address() -> None:
    message, reason = refusal("https://10.0.0.7/clients/app.json")
    assert "10.0.0.7" in message  # DOT's log line names it...
    assert reason == "its host resolves to a non-public address"  # ...the page does not


def test_a_host_that_does_not_resolve_says_so_without_the_resolver_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_such_host(*args: Any, **kwargs: Any) -> Any:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_such_host)
    message, reason = refusal("https://client.example.invalid/app.json")
    assert "Name or service not known" in message
    assert reason == "its host name could not be resolved"


def test_a_fetch_that_failed_hides_the_network_error() -> None:
    error = CIMDError("could not fetch client_id document: ConnectTimeoutError(<urllib3 ...>, 'timed out')")
    assert public_reason(error) == "it could not be fetched"


@pytest.mark.parametrize(
    "url",
    ["http://clients.example.com/app.json", "https://clients.example.com/app.json#frag", "https://clients.example.com"],
)
def test_the_documents_own_faults_are_shown_as_dot_words_them(url: str) -> None:
    message, reason = refusal(url)
    assert reason == message
    assert reason.startswith("client_id URL must")
