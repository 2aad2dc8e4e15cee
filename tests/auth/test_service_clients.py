"""Service clients (``mcp_django.auth.service_clients``): the ``client_credentials`` grant at
django-oauth-toolkit's real token endpoint, in-process, for applications an admin marked, and
the token on the MCP endpoint acting as the service user, with that user's permissions.

Every refusal at the token endpoint is an RFC 6749 error code (section 5.2), or RFC 8707's
``invalid_target``.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.test import Client, override_settings
from oauth2_provider.models import AccessToken, Application

from mcp_django.auth.service_clients.models import ServiceClient
from mcp_django.checks.service_clients import check_service_clients
from mcp_django.registry.admin_bridge import is_never_exposed
from mcp_django.testing import MCPTestClient
from tests.conftest import BASE_SETTINGS, make_user
from tests.testapp.models import Note

RESOURCE = "https://mcp.example.com/mcp"
OAUTH = {**BASE_SETTINGS, "AUTHENTICATION": "oauth", "RESOURCE_URL": RESOURCE}
VALIDATOR = "mcp_django.auth.oauth_validator.MCPOAuth2Validator"
PROVIDER = {
    "OAUTH2_VALIDATOR_CLASS": VALIDATOR,
    "SCOPES": {"notes:read": "Read notes", "notes:write": "Write notes"},
    "DEFAULT_SCOPES": ["notes:read"],
    "OAUTH2_GRANT_TYPES_SUPPORTED": ["authorization_code", "refresh_token", "client_credentials"],
}
SECRET = "s3cret-of-the-nightly-job"

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_channel_layer"),
]


@pytest.fixture(autouse=True)
def _own_authorization_server() -> Iterator[None]:
    with override_settings(
        ROOT_URLCONF="tests.urls_oauth_server", OAUTH2_PROVIDER=PROVIDER, MCP_DJANGO=OAUTH
    ):
        yield


def application(
    name: str = "nightly job",
    *,
    client_type: str = Application.CLIENT_CONFIDENTIAL,
    grant: str = Application.GRANT_CLIENT_CREDENTIALS,
) -> Application:
    # DOT hashes the secret on save; the plain one is what the client sends.
    return Application.objects.create(
        name=name, client_type=client_type, authorization_grant_type=grant, client_secret=SECRET
    )


def service_client(
    app: Application | None = None, user: Any = None, **fields: Any
) -> ServiceClient:
    app = app or application()
    user = user or make_user("nightly-bot", "view_note", "add_note")
    return ServiceClient.objects.create(application=app, user=user, **fields)


def token_response(app: Application, secret: str = SECRET, **fields: str) -> Any:
    """POST a client_credentials request to the token endpoint, authenticating with HTTP Basic."""
    basic = base64.b64encode(f"{app.client_id}:{secret}".encode()).decode()
    return Client().post(
        "/o/token/",
        {"grant_type": "client_credentials", **fields},
        HTTP_AUTHORIZATION=f"Basic {basic}",
    )


def refused_with(response: Any) -> str:
    assert response.status_code in (400, 401), (response.status_code, response.content)
    assert not AccessToken.objects.exists()  # a refusal leaves no token behind
    return str(response.json()["error"])  # and says so in JSON (RFC 6749 section 5.2)


# -- issuing ------------------------------------------------------------------------------------


def test_a_service_client_gets_a_token_acting_as_its_service_user_for_the_mcp_resource() -> None:
    marked = service_client()

    response = token_response(marked.application)

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["token_type"] == "Bearer" and body["scope"] == "notes:read"
    assert "refresh_token" not in body  # RFC 6749 section 4.4.3
    token = AccessToken.objects.get()
    assert token.user == marked.user
    assert token.application == marked.application
    assert token.resource == [RESOURCE]  # bound to this server, as every token it issues


def test_a_service_client_naming_the_mcp_resource_gets_a_token_for_it() -> None:
    marked = service_client()

    response = token_response(marked.application, resource="https://MCP.example.com/mcp/")

    assert response.status_code == 200, response.content
    assert AccessToken.objects.get().user == marked.user


def test_the_client_secret_in_the_body_is_accepted_too() -> None:
    marked = service_client()

    response = Client().post(
        "/o/token/",
        {
            "grant_type": "client_credentials",
            "client_id": marked.application.client_id,
            "client_secret": SECRET,
        },
    )

    assert response.status_code == 200, response.content


def test_a_service_client_may_ask_for_scopes_it_is_allowed() -> None:
    marked = service_client(scope="notes:read notes:write")

    response = token_response(marked.application, scope="notes:read notes:write")

    assert response.status_code == 200, response.content
    assert set(AccessToken.objects.get().scope.split()) == {"notes:read", "notes:write"}


# -- refusals -----------------------------------------------------------------------------------


def test_a_wrong_secret_is_refused_with_invalid_client() -> None:
    marked = service_client()

    assert refused_with(token_response(marked.application, secret="guess")) == "invalid_client"


def test_a_client_without_its_secret_is_refused_with_invalid_client() -> None:
    marked = service_client()

    response = Client().post(
        "/o/token/",
        {"grant_type": "client_credentials", "client_id": marked.application.client_id},
    )

    assert refused_with(response) == "invalid_client"


def test_a_public_client_is_refused_with_unauthorized_client_even_with_its_secret() -> None:
    public = application("public job", client_type=Application.CLIENT_PUBLIC)
    # Set behind clean()'s back, as a row changed outside the admin could be.
    ServiceClient.objects.create(application=public, user=make_user("public-bot"))

    response = token_response(public)

    assert refused_with(response) == "unauthorized_client"
    assert "confidential" in response.json()["error_description"]


def test_an_application_not_marked_as_a_service_client_is_refused_with_unauthorized_client() -> (
    None
):
    response = token_response(application())

    assert refused_with(response) == "unauthorized_client"
    assert "not a service client" in response.json()["error_description"]


def test_an_application_of_another_grant_type_is_refused_with_unauthorized_client() -> None:
    app = application("code client", grant=Application.GRANT_AUTHORIZATION_CODE)
    ServiceClient.objects.create(application=app, user=make_user("code-bot"))

    response = token_response(app)

    assert refused_with(response) == "unauthorized_client"
    assert "grant type is not client credentials" in response.json()["error_description"]


def test_a_disabled_service_client_is_refused_with_unauthorized_client() -> None:
    marked = service_client(enabled=False)

    response = token_response(marked.application)

    assert refused_with(response) == "unauthorized_client"
    assert "disabled" in response.json()["error_description"]


def test_an_inactive_service_user_is_refused_with_unauthorized_client() -> None:
    marked = service_client(user=make_user("retired-bot", is_active=False))

    response = token_response(marked.application)

    assert refused_with(response) == "unauthorized_client"
    assert "inactive" in response.json()["error_description"]


def test_a_scope_beyond_what_the_service_client_is_allowed_is_refused_with_invalid_scope() -> None:
    marked = service_client(scope="notes:read")

    response = token_response(marked.application, scope="notes:read notes:write")

    assert refused_with(response) == "invalid_scope"


def test_a_scope_the_server_does_not_know_is_refused_with_invalid_scope() -> None:
    marked = service_client()

    assert refused_with(token_response(marked.application, scope="admin")) == "invalid_scope"


def test_no_scope_asked_gets_the_default_scopes_the_client_is_allowed() -> None:
    marked = service_client(scope="notes:write")

    response = token_response(marked.application, scope="")

    # DEFAULT_SCOPES is notes:read, which this client may not have: it gets none of it.
    assert response.status_code == 200, response.content
    assert AccessToken.objects.get().scope == ""


def test_a_token_for_another_resource_is_refused_with_invalid_target() -> None:
    marked = service_client()

    response = token_response(marked.application, resource="https://api.example.com/")

    assert refused_with(response) == "invalid_target"


@override_settings(MCP_DJANGO=OAUTH)
def test_without_the_service_clients_app_every_client_credentials_request_is_refused() -> None:
    marked = service_client()

    with override_settings(
        INSTALLED_APPS=[
            "django.contrib.auth",
            "django.contrib.contenttypes",
            "oauth2_provider",
            "mcp_django",
        ]
    ):
        response = token_response(marked.application)

    assert refused_with(response) == "unauthorized_client"


# -- the token on the MCP endpoint --------------------------------------------------------------


def _issue(scope: str = "notes:read notes:write") -> tuple[str, Any]:
    marked = service_client(scope=scope)
    response = token_response(marked.application, scope=scope)
    assert response.status_code == 200, response.content
    return str(response.json()["access_token"]), marked.user


issue = sync_to_async(_issue)


async def mcp_client(raw: str) -> MCPTestClient:
    client = MCPTestClient(headers={"authorization": f"Bearer {raw}"})
    await client.initialize()
    return client


async def test_the_service_users_permissions_decide_which_tools_the_client_may_use() -> None:
    raw, _ = await issue()
    client = await mcp_client(raw)

    names = {t["name"] for t in (await client.call("tools/list"))["tools"]}

    # view_note and add_note: search, get and create; not update or delete.
    notes = {name for name in names if "note" in name and name != "purge_notes"}
    assert any(name.endswith("create") for name in notes), notes
    assert any(name.endswith("search") for name in notes), notes
    assert not any(name.endswith(("update", "delete")) for name in notes), notes


async def test_the_service_users_row_rules_decide_which_rows_the_client_sees() -> None:
    raw, bot = await issue()
    someone = await sync_to_async(make_user)("someone", "view_note")
    await Note.objects.acreate(owner=someone, title="private")
    client = await mcp_client(raw)
    tools = {t["name"] for t in (await client.call("tools/list"))["tools"]}
    create = next(n for n in tools if "note" in n and n.endswith("create"))
    search = next(n for n in tools if "note" in n and n.endswith("search"))

    created = await client.call_tool(create, {"title": "nightly report"})
    found = await client.call_tool(search, {})

    assert not created.get("isError"), created
    assert await Note.objects.filter(owner=bot, title="nightly report").aexists()
    text = str(found["content"])
    assert "nightly report" in text and "private" not in text


async def test_a_tool_needing_a_scope_the_client_was_not_allowed_answers_403() -> None:
    raw, _ = await issue(scope="notes:read")
    client = await mcp_client(raw)

    response = await client.post(
        {
            "jsonrpc": "2.0",
            "id": 9,
            "method": "tools/call",
            "params": {"name": "scoped_write", "arguments": {"text": "x"}},
        }
    )

    assert response.status == 403
    assert 'error="insufficient_scope"' in response.headers["www-authenticate"]


async def test_the_token_stops_working_when_the_service_user_is_deactivated() -> None:
    raw, bot = await issue()
    await User.objects.filter(pk=bot.pk).aupdate(is_active=False)

    response = await MCPTestClient(headers={"authorization": f"Bearer {raw}"}).post(
        {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    )

    assert response.status == 401
    assert 'error="invalid_token"' in response.headers["www-authenticate"]


# -- the mark -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change",
    [
        {"enabled": False},
        {"scope": "notes:read"},
        {"user": "other"},
    ],
)
def test_changing_whom_or_what_a_service_client_acts_for_revokes_its_tokens(
    change: dict[str, Any],
) -> None:
    marked = service_client(scope="notes:read notes:write")
    assert token_response(marked.application).status_code == 200
    if change.get("user") == "other":
        change = {"user": make_user("other-bot")}

    for name, value in change.items():
        setattr(marked, name, value)
    marked.save()

    assert not AccessToken.objects.exists()


def test_a_new_note_on_a_service_client_keeps_its_tokens() -> None:
    marked = service_client()
    assert token_response(marked.application).status_code == 200

    marked.note = "Runs at 02:00 on the CI box."
    marked.save()

    assert AccessToken.objects.count() == 1


def test_removing_the_mark_revokes_the_tokens() -> None:
    marked = service_client()
    assert token_response(marked.application).status_code == 200

    marked.delete()

    assert not AccessToken.objects.exists()


def test_the_mark_refuses_a_public_application() -> None:
    marked = ServiceClient(
        application=application(client_type=Application.CLIENT_PUBLIC),
        user=make_user("bot"),
    )

    with pytest.raises(ValidationError) as refused:
        marked.full_clean()

    assert "confidential" in str(refused.value.message_dict["application"])


def test_the_mark_refuses_an_application_of_another_grant_type() -> None:
    marked = ServiceClient(
        application=application(grant=Application.GRANT_AUTHORIZATION_CODE),
        user=make_user("bot"),
    )

    with pytest.raises(ValidationError) as refused:
        marked.full_clean()

    assert "client credentials" in str(refused.value.message_dict["application"])


def test_the_mark_names_both_rules_a_public_application_of_another_grant_type_breaks() -> None:
    marked = ServiceClient(
        application=application(
            client_type=Application.CLIENT_PUBLIC, grant=Application.GRANT_AUTHORIZATION_CODE
        ),
        user=make_user("bot"),
    )

    with pytest.raises(ValidationError) as refused:
        marked.full_clean()

    assert refused.value.message_dict["application"] == [
        "A service client must be a confidential application: a public one has no secret.",
        "Set the application's authorization grant type to client credentials.",
    ]


def test_the_mark_refuses_scopes_the_server_does_not_know() -> None:
    marked = ServiceClient(application=application(), user=make_user("bot"), scope="notes:read x")

    with pytest.raises(ValidationError) as refused:
        marked.full_clean()

    assert refused.value.message_dict["scope"] == ["Unknown scopes: x."]


# -- admin --------------------------------------------------------------------------------------


def test_the_admin_lists_service_clients_with_their_filters_and_live_tokens() -> None:
    marked = service_client(note="the nightly export")
    assert token_response(marked.application).status_code == 200
    admin = Client()
    admin.force_login(User.objects.create_superuser("root", password="pw"))

    with override_settings(ROOT_URLCONF="tests.urls"):
        listing = admin.get("/admin/mcp_service_clients/serviceclient/", {"enabled__exact": "1"})
        change = admin.get(f"/admin/mcp_service_clients/serviceclient/{marked.pk}/change/")

    assert listing.status_code == 200 and change.status_code == 200
    page = listing.content.decode()
    assert "nightly job" in page and "nightly-bot" in page
    assert f"application__id__exact={marked.application_id}" in page  # its tokens, one click away
    assert "Inactive: gets no token" in page  # the service user filter


def test_an_admin_form_with_a_public_application_is_refused() -> None:
    admin = Client()
    admin.force_login(User.objects.create_superuser("root", password="pw"))
    public = application(client_type=Application.CLIENT_PUBLIC)
    bot = make_user("bot")

    with override_settings(ROOT_URLCONF="tests.urls"):
        response = admin.post(
            "/admin/mcp_service_clients/serviceclient/add/",
            {"application": public.pk, "user": bot.pk, "enabled": "on", "scope": "", "note": ""},
        )

    assert response.status_code == 200  # the form again, with the error
    assert "confidential" in response.content.decode()
    assert not ServiceClient.objects.exists()


# -- checks -------------------------------------------------------------------------------------


def test_e270_service_clients_with_another_validator() -> None:
    provider = {
        **PROVIDER,
        "OAUTH2_VALIDATOR_CLASS": "oauth2_provider.oauth2_validators.OAuth2Validator",
    }

    with override_settings(OAUTH2_PROVIDER=provider):
        ids = [message.id for message in check_service_clients()]

    assert ids == ["mcp_django.E270"]


def test_w270_service_clients_installed_but_the_grant_not_advertised() -> None:
    provider = {**PROVIDER, "OAUTH2_GRANT_TYPES_SUPPORTED": ["authorization_code", "refresh_token"]}

    with override_settings(OAUTH2_PROVIDER=provider):
        ids = [message.id for message in check_service_clients()]

    assert ids == ["mcp_django.W270"]


def test_w271_the_grant_advertised_without_the_service_clients_app() -> None:
    apps = ["django.contrib.auth", "django.contrib.contenttypes", "oauth2_provider", "mcp_django"]

    with override_settings(INSTALLED_APPS=apps):
        ids = [message.id for message in check_service_clients()]

    assert ids == ["mcp_django.W271"]


def test_a_consistent_configuration_passes_the_checks() -> None:
    assert check_service_clients() == []


def test_the_admin_bridge_never_exposes_service_clients_to_mcp_clients() -> None:
    # An agent acting for a superuser could otherwise bind a service client to any user.
    assert is_never_exposed(ServiceClient)
