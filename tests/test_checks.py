"""System checks: one test per check id, plus the clean configuration reporting nothing."""

from __future__ import annotations

from typing import Any

import pytest
from django.core import checks
from django.test import override_settings

from mcp_django import site
from mcp_django.checks import check_deployment, check_proxy, check_settings, check_sites, check_urls
from mcp_django.registry.sites import MCPSite, all_sites

# Django 6.1's ``check`` runs the model checks against every database (a JSONField asks SQLite
# whether it supports JSON): a full ``manage.py check`` needs the test database.
needs_database_for_model_checks = pytest.mark.django_db

BASE: dict[str, Any] = {"AUTHENTICATION": "none", "SERVER_NAME": "mcp-django-tests"}


def ids(messages: list[checks.CheckMessage]) -> list[str]:
    return [m.id for m in messages]


def settings_errors(**overrides: Any) -> list[checks.CheckMessage]:
    # DEBUG on, so that W002 (no authentication in production) stays out of other checks' way.
    with override_settings(DEBUG=True, MCP_DJANGO={**BASE, **overrides}):
        return check_settings()


def project_errors(**django_settings: Any) -> list[checks.CheckMessage]:
    with override_settings(DEBUG=True, **django_settings):
        return check_settings()


def test_test_project_configuration_is_clean():
    assert project_errors() == []
    assert check_deployment() == []
    # Only the default site: other tests leave their own sites in all_sites meanwhile. (Its
    # bare tools' W131 is silenced in tests/settings.py, which site.check() itself does not read.)
    assert [m for m in site.check(None) if m.id != "mcp_django.W131"] == []


def test_site_checks_run_over_every_site():
    class Complaining(MCPSite):
        def check(self, app_configs=None):
            return [checks.Error("complaint", id="test.E001")]

    complaining = Complaining(name="complaining")
    assert "test.E001" in ids(check_sites())
    del complaining


def test_checks_are_registered_with_the_mcp_django_tag():
    with override_settings(DEBUG=True, MCP_DJANGO={**BASE, "RESPONSE_MODE": "xml"}):
        found = checks.run_checks(tags=["mcp_django"])
    assert "mcp_django.E003" in ids(found)


def test_e001_mcp_django_must_be_a_dict():
    assert ids(project_errors(MCP_DJANGO=["AUTHENTICATION", "none"])) == ["mcp_django.E001"]


def test_e002_unknown_setting_suggests_the_close_match():
    [error] = settings_errors(PAGE_SIZ=10)
    assert error.id == "mcp_django.E002"
    assert "PAGE_SIZ" in error.msg
    assert "PAGE_SIZE" in error.hint


def test_e003_response_mode_must_be_json_or_sse():
    [error] = settings_errors(RESPONSE_MODE="xml")
    assert error.id == "mcp_django.E003"
    assert error.hint


@pytest.mark.parametrize(
    "value", ["no.such.Authentication", "mcp_django.stores.DatabaseEventStore", 42]
)
def test_e004_authentication_must_be_an_authentication_class(value):
    [error] = settings_errors(AUTHENTICATION=value)
    assert error.id == "mcp_django.E004"


@pytest.mark.parametrize(
    "key,value,check_id",
    [
        ("MAX_BODY_SIZE", 0, "E005"),
        ("PAGE_SIZE", -1, "E005"),
        ("SESSION_TTL", "60", "E005"),
        ("MAX_BATCH_SIZE", True, "E005"),
        ("SSE_RETRY_MS", 1.5, "E005"),
        ("SSE_KEEPALIVE_SECONDS", -1, "E017"),
        ("SSE_MAX_CONNECTION_SECONDS", "10", "E017"),
        ("CLIENT_REQUEST_TIMEOUT", False, "E017"),
        ("SSE_REAUTH_SECONDS", -1, "E017"),
        ("SERVER_REQUEST_TTL", "1", "E017"),
        ("DISCONNECT_GRACE_SECONDS", -1, "E017"),
        ("DISCONNECT_GRACE_SECONDS", "30", "E017"),
        ("PLAIN_STREAM_SECONDS", -1, "E017"),
        ("PLAIN_STREAMS", 0, "E150"),
    ],
)
def test_e005_e017_numbers_must_be_in_range(key, value, check_id):
    """E005 and E150: a positive integer; E017: a non-negative number or None (one id per rule)."""
    [error] = settings_errors(**{key: value})
    assert error.id == f"mcp_django.{check_id}"
    assert key in error.msg


@pytest.mark.parametrize("value", [0, -5, "60", True])
def test_e160_request_lease_must_be_positive(value):
    [error] = settings_errors(REQUEST_LEASE_SECONDS=value)
    assert error.id == "mcp_django.E160"
    assert error.hint


@pytest.mark.parametrize("value", ["a" * 48, ["short"], ["a" * 48, 42], [None], ("a" * 31,)])
def test_e020_request_state_keys_must_be_long_strings(value):
    [error] = settings_errors(REQUEST_STATE_KEYS=value)
    assert error.id == "mcp_django.E020"
    assert "secrets.token_urlsafe" in error.hint


@pytest.mark.parametrize("value", [[], ["a" * 32], ("a" * 48, "b" * 64)])
def test_e020_accepts_an_empty_list_and_long_keys(value):
    assert settings_errors(REQUEST_STATE_KEYS=value) == []


@pytest.mark.parametrize("value", [0, -1, "600", True, None, float("inf"), float("nan")])
def test_e021_request_state_ttl_must_be_a_positive_number(value):
    [error] = settings_errors(REQUEST_STATE_TTL=value)
    assert error.id == "mcp_django.E021"
    assert error.hint


@pytest.mark.parametrize("value", [0, -1, 255, "65536", 65536.0, True, None])
def test_e022_max_request_state_bytes_must_be_an_integer_of_some_size(value):
    [error] = settings_errors(MAX_REQUEST_STATE_BYTES=value)
    assert error.id == "mcp_django.E022"
    assert "65536" in error.hint


def test_e020_e021_e022_accept_sensible_values():
    assert (
        settings_errors(
            REQUEST_STATE_KEYS=["k" * 40], REQUEST_STATE_TTL=0.5, MAX_REQUEST_STATE_BYTES=256
        )
        == []
    )


@pytest.mark.parametrize(
    "value,check_id",
    [
        ("https://app.example", "E006"),
        ([1], "E006"),
        (["not an origin"], "E019"),
        (["ftp://files.example"], "E019"),
    ],
)
def test_e006_e019_allowed_origins_must_be_a_list_of_origins(value, check_id):
    errors = settings_errors(ALLOWED_ORIGINS=value)
    assert ids(errors) == [f"mcp_django.{check_id}"]


def test_e006_accepts_origins_and_the_wildcard():
    assert (
        settings_errors(ALLOWED_ORIGINS=["https://app.example", "http://localhost:3000", "*"]) == []
    )


@pytest.mark.parametrize("value", ["no.such.Store", "mcp_django.auth.base.NoAuthentication"])
def test_e007_event_store_class_must_be_an_event_store(value):
    [error] = settings_errors(EVENT_STORE_CLASS=value)
    assert error.id == "mcp_django.E007"


def test_e008_channel_layer_alias_must_exist():
    [error] = settings_errors(CHANNEL_LAYER="elsewhere")
    assert error.id == "mcp_django.E008"


def test_e009_asgi_application_must_be_importable():
    assert ids(project_errors(ASGI_APPLICATION="tests.no_such_module.application")) == [
        "mcp_django.E009"
    ]


def test_e010_log_bridge_loggers_must_be_logger_names():
    [error] = settings_errors(LOG_BRIDGE_LOGGERS="myapp")
    assert error.id == "mcp_django.E010"


def test_w001_without_channel_layers():
    assert ids(project_errors(CHANNEL_LAYERS={})) == ["mcp_django.W001"]


def test_w001_not_for_a_wsgi_only_project():
    # The plain view holds no stream: several WSGI workers need no channel layer, as
    # docs/howto/deploy.md says, so `check` must not tell a gunicorn project to add Redis.
    with override_settings(CHANNEL_LAYERS={}):
        assert ids(wsgi_only_messages()) == ["mcp_django.I171"]


REDIS_LAYER = "channels_redis.core.RedisChannelLayer"


@pytest.mark.parametrize(
    ("hosts", "warned"),
    [
        (None, True),  # channels_redis's default host, redis-py's default timeout
        (["redis://127.0.0.1:6379/0"], True),  # a URL cannot carry a timeout
        ([("127.0.0.1", 6379)], True),
        ([{"address": "redis://127.0.0.1:6379/0"}], True),
        (
            [{"address": "redis://127.0.0.1:6379/0", "socket_timeout": 5}],
            True,
        ),  # not longer than the 5 s receive
        ([{"address": "redis://127.0.0.1:6379/0", "socket_timeout": 15}], False),
        (
            [{"address": "redis://127.0.0.1:6379/0", "socket_timeout": None}],
            False,
        ),  # no timeout, as before redis-py 8
        (
            [{"address": "redis://a:6379/0", "socket_timeout": 15}, "redis://b:6379/0"],
            True,
        ),  # every host counts
    ],
)
def test_w006_channels_redis_needs_a_socket_timeout_longer_than_its_blocking_receive(
    hosts: Any, warned: bool
) -> None:
    config = {"hosts": hosts} if hosts is not None else {}
    messages = project_errors(
        CHANNEL_LAYERS={"default": {"BACKEND": REDIS_LAYER, "CONFIG": config}}, CACHES=SHARED_CACHES
    )
    assert ids(messages) == (["mcp_django.W006"] if warned else [])
    if warned:
        assert '"socket_timeout": 15' in str(messages[0].hint)


def test_w006_is_only_about_channels_redis() -> None:
    layers = {"default": {"BACKEND": "mcp_django.transport.layers.InMemoryChannelLayer"}}
    assert ids(project_errors(CHANNEL_LAYERS=layers)) == []


SHARED_CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": "redis://127.0.0.1:6379/0",
    }
}
SEVERAL_PROCESSES = {
    "default": {
        "BACKEND": REDIS_LAYER,
        "CONFIG": {"hosts": [{"address": "redis://127.0.0.1:6379/0", "socket_timeout": 15}]},
    }
}
LOCMEM = "django.core.cache.backends.locmem.LocMemCache"


def test_w185_a_channel_layer_over_processes_with_quotas_counted_per_process() -> None:
    # The default CACHES is the local-memory cache, and so QUOTAS["CACHE"] = "default" with it.
    [warning] = project_errors(
        CHANNEL_LAYERS=SEVERAL_PROCESSES, CACHES={"default": {"BACKEND": LOCMEM}}
    )
    assert warning.id == "mcp_django.W185"
    assert (
        "holds per process" in warning.msg
        and "RUNNING_PER_*" in warning.msg
        and "RedisCache" in str(warning.hint)
    )
    # The quotas' own alias is the one looked at.
    caches = {**SHARED_CACHES, "local": {"BACKEND": LOCMEM}}
    with override_settings(
        DEBUG=True,
        CHANNEL_LAYERS=SEVERAL_PROCESSES,
        CACHES=caches,
        MCP_DJANGO={**BASE, "QUOTAS": {"CACHE": "local"}},
    ):
        assert ids(check_settings()) == ["mcp_django.W185"]


@pytest.mark.parametrize(
    ("layers", "caches"),
    [
        (SEVERAL_PROCESSES, SHARED_CACHES),  # a shared cache
        (
            {"default": {"BACKEND": "mcp_django.transport.layers.InMemoryChannelLayer"}},
            {"default": {"BACKEND": LOCMEM}},
        ),  # one process
        (
            {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}},
            {"default": {"BACKEND": LOCMEM}},
        ),
        (
            SEVERAL_PROCESSES,
            {
                "default": {
                    "BACKEND": "django.core.cache.backends.memcached.PyMemcacheCache",
                    "LOCATION": "127.0.0.1:11211",
                }
            },
        ),
    ],
)
def test_w185_and_w186_are_quiet_with_one_process_or_a_shared_atomic_cache(
    layers: Any, caches: Any
) -> None:
    assert ids(project_errors(CHANNEL_LAYERS=layers, CACHES=caches)) == []


@pytest.mark.parametrize(
    "backend",
    [
        "django.core.cache.backends.db.DatabaseCache",
        "django.core.cache.backends.filebased.FileBasedCache",
    ],
)
def test_w186_a_shared_cache_that_cannot_count_atomically(backend: str) -> None:
    [warning] = project_errors(
        CHANNEL_LAYERS=SEVERAL_PROCESSES,
        CACHES={"default": {"BACKEND": backend, "LOCATION": "quota"}},
    )
    assert warning.id == "mcp_django.W186"
    assert "reads a counter and writes it back" in warning.msg


def test_w002_no_authentication_without_debug():
    with override_settings(DEBUG=False, MCP_DJANGO=BASE):
        assert ids(check_settings()) == ["mcp_django.W002"]


def test_w002_hint_names_every_built_in_policy():
    with override_settings(DEBUG=False, MCP_DJANGO=BASE):
        [warning] = check_settings()
    assert all(f'"{policy}"' in warning.hint for policy in ("django", "oauth", "jwt"))


def test_w002_is_quiet_in_debug():
    assert settings_errors(AUTHENTICATION="none") == []


def test_e170_no_url_routes_to_the_endpoint():
    with override_settings(ROOT_URLCONF="tests.urls_without_mcp"):
        messages = check_urls()
    assert "mcp_django.E170" in ids(messages)
    assert (
        'include("mcp_django.urls")' in next(m for m in messages if m.id == "mcp_django.E170").hint
    )


@needs_database_for_model_checks
def test_e170_is_reported_by_manage_py_check():
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError

    with (
        override_settings(ROOT_URLCONF="tests.urls_without_mcp"),
        pytest.raises(SystemCheckError, match="mcp_django.E170"),
    ):
        call_command("check")


def test_e170_is_quiet_when_the_endpoint_is_routed():
    assert "mcp_django.E170" not in ids(check_urls())


def test_w170_a_second_site_without_urls():
    other = MCPSite(name="unrouted")
    other.tool(lambda: "x", name="x")
    messages = [m for m in check_urls() if m.id == "mcp_django.W170"]
    assert [m.obj for m in messages if m.obj is other] == [other]


def test_e180_an_include_without_its_trailing_slash():
    with override_settings(ROOT_URLCONF="tests.urls_without_slash"):
        messages = [m for m in check_urls() if m.id == "mcp_django.E180"]
    assert [m.msg.split(" without")[0] for m in messages] == [
        "The MCP site 'mcp' is included at 'mcp',",
        "The MCP site 'mcp' is included at 'api/v1/mcp',",
    ]
    assert "/mcpsse/" in messages[0].msg and 'path("mcp/", include(...))' in messages[0].hint


def test_e180_is_quiet_with_the_trailing_slash():
    assert "mcp_django.E180" not in ids(check_urls())


def test_w182_a_routed_site_with_nothing_registered_names_the_module_autodiscovery_imports():
    with override_settings(ROOT_URLCONF="tests.urls_empty_site"):
        [warning] = [m for m in check_urls() if m.id == "mcp_django.W182"]
    assert warning.obj.name == "empty"
    assert "<app>/mcp.py" in warning.hint and "Not imported" not in warning.hint


def test_w182_names_an_installed_module_that_looks_like_registrations():
    from django.conf import settings

    with override_settings(
        ROOT_URLCONF="tests.urls_empty_site",
        INSTALLED_APPS=[*settings.INSTALLED_APPS, "tests.wiringapp"],
    ):
        [warning] = [m for m in check_urls() if m.id == "mcp_django.W182"]
    assert "Not imported, and they look like registrations: wiringapp/mcp_tools.py." in warning.hint


def test_w182_is_quiet_when_the_site_has_registrations():
    assert "mcp_django.W182" not in ids(check_urls())


@pytest.mark.parametrize(
    "name", ["DJANGO_MCP", "MCPDJANGO", "MCP_DJANGO_SETTINGS", "MCP_SETTINGS", "MCP"]
)
def test_w181_a_settings_dict_under_another_name(name):
    from django.conf import settings

    with override_settings(DEBUG=True, **{name: {"AUTHENTICATION": "none"}}):
        del settings.MCP_DJANGO
        [warning] = [m for m in check_settings() if m.id == "mcp_django.W181"]
    assert repr(name) in warning.msg and "MCP_DJANGO" in warning.hint


def test_w181_reads_lower_case_names_that_django_skips(monkeypatch):
    from django.conf import settings

    import tests.settings

    monkeypatch.setattr(tests.settings, "mcp_django", {"SERVER_NAME": "x"}, raising=False)
    with override_settings(DEBUG=True):
        del settings.MCP_DJANGO
        [warning] = [m for m in check_settings() if m.id == "mcp_django.W181"]
    assert "'mcp_django'" in warning.msg and "upper-case" in warning.hint


def test_w181_is_quiet_while_mcp_django_is_set_or_for_unrelated_dicts():
    from django.conf import settings

    assert settings_errors() == []
    with override_settings(DEBUG=True, MCP_SERVERS={"x": 1}):
        del settings.MCP_DJANGO
        assert "mcp_django.W181" not in ids(check_settings())


def without_daphne() -> list[str]:
    from django.conf import settings

    return [a for a in settings.INSTALLED_APPS if a != "daphne"]


def manage_py_check(*args: str) -> str:
    """What ``manage.py check`` prints. Errors do not raise: sites that other tests built on
    purpose with broken registrations may still be alive in this process."""
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("check", *args, "--fail-level", "CRITICAL", stdout=out, stderr=out)
    return out.getvalue()


def wsgi_only_messages(**mcp: Any) -> list[checks.CheckMessage]:
    """What check_settings says of a project served by WSGI only (callers pick by id)."""
    with override_settings(MCP_DJANGO={**BASE, **mcp}):
        return project_errors(INSTALLED_APPS=without_daphne(), ASGI_APPLICATION=None)


def wsgi_only_deploy_messages(**mcp: Any) -> list[checks.CheckMessage]:
    """What ``check --deploy`` adds for a project served by WSGI only (callers pick by id)."""
    with override_settings(
        MCP_DJANGO={**BASE, **mcp}, INSTALLED_APPS=without_daphne(), ASGI_APPLICATION=None
    ):
        return check_deployment()


def i174(**mcp: Any) -> checks.CheckMessage:
    [info] = [m for m in wsgi_only_deploy_messages(**mcp) if m.id == "mcp_django.I174"]
    return info


def test_i171_a_wsgi_only_project_is_told_in_a_line_that_its_endpoint_is_the_plain_view():
    [info] = [m for m in wsgi_only_messages() if m.id == "mcp_django.I171"]

    assert info.level == checks.INFO
    assert "plain view" in info.msg and "check --deploy" in info.msg
    # Django prints it on every management command: a line, not the list (I174 has that).
    assert len(info.msg) < 400 and "subscriptions/listen" not in info.msg
    assert '"daphne"' in info.hint and "MCPRouter" in info.hint
    assert '"mcp_django.I171" to SILENCED_SYSTEM_CHECKS' in info.hint


def test_i171_hint_names_this_projects_asgi_module_once():
    [info] = [m for m in wsgi_only_messages() if m.id == "mcp_django.I171"]

    # The test project's settings are tests.settings, so its asgi.py is tests/asgi.py.
    assert 'ASGI_APPLICATION = "tests.asgi.application"' in info.hint
    assert "<project>" not in info.hint
    assert info.hint.count("ASGI_APPLICATION") == 2  # set it; and set it under uvicorn too
    assert "application = mcp_django.routing.MCPRouter(get_asgi_application())" in info.hint


def test_i174_check_deploy_says_what_the_plain_view_serves_and_what_needs_asgi():
    info = i174()

    assert info.level == checks.INFO
    assert "plain view" in info.msg and "2026-07-28" in info.msg
    assert "subscriptions/listen" in info.msg
    assert 'ASGI_APPLICATION = "tests.asgi.application"' in info.hint


def test_i174_is_not_said_of_a_project_served_by_asgi():
    assert [m for m in check_deployment() if m.id == "mcp_django.I174"] == []


def test_i174_names_the_tools_whose_questions_need_asgi():
    info = i174()

    assert "ask the client" in info.msg
    assert "progress" in info.msg  # the test site's tool of that name takes a Context


def test_i174_names_the_task_tools_whose_2025_waits_need_asgi():
    import tests.urls_plain_tasks  # noqa: F401 (registers the task tools "count" and "hold")

    info = i174()

    assert "tasks/result waiting past PLAIN_STREAM_SECONDS" in info.msg
    assert "count" in info.msg


def test_i174_says_the_plain_view_streams_a_calls_progress_within_its_bounds():
    info = i174()

    assert "PLAIN_STREAMS" in info.msg and "PLAIN_STREAM_SECONDS" in info.msg


def test_i174_names_the_http_sse_transport_when_it_is_on():
    assert "HTTP_SSE" in i174(HTTP_SSE=True).msg


def test_i171_is_reported_by_manage_py_check():
    # Only mcp_django's checks: daphne's own returns None once daphne is taken out this way.
    with override_settings(INSTALLED_APPS=without_daphne(), ASGI_APPLICATION=None):
        assert "mcp_django.I171" in manage_py_check("--tag", "mcp_django")


def test_i171_is_quiet_when_asgi_application_names_what_uvicorn_serves():
    # No daphne, but ASGI_APPLICATION says which application is served: its wiring is checked.
    assert project_errors(INSTALLED_APPS=without_daphne()) == []
    assert ids(
        project_errors(
            INSTALLED_APPS=without_daphne(), ASGI_APPLICATION="tests.asgi.django_asgi_app"
        )
    ) == ["mcp_django.W173"]


def test_w003_without_asgi_application_under_daphne():
    # daphne's runserver refuses to start without it.
    [warning] = project_errors(ASGI_APPLICATION=None)
    assert warning.id == "mcp_django.W003"
    assert "MCPRouter" in warning.hint


@pytest.mark.parametrize(
    "path",
    [
        "tests.asgi.django_asgi_app",
        "tests.asgi_variants.protocol_router_without_mcp",
        "tests.asgi_variants.websocket_only",
        "tests.asgi_variants.static_files_without_mcp",
    ],
)
def test_w173_asgi_application_without_the_router_gets_the_plain_view(path):
    [warning] = project_errors(ASGI_APPLICATION=path)

    assert warning.id == "mcp_django.W173"
    assert warning.level == checks.WARNING
    assert "plain view" in warning.msg and "subscriptions/listen" in warning.msg
    assert "MCPRouter(get_asgi_application())" in warning.hint


@needs_database_for_model_checks
def test_w173_is_reported_by_manage_py_check():
    with override_settings(ASGI_APPLICATION="tests.asgi.django_asgi_app"):
        assert "mcp_django.W173" in manage_py_check()


@pytest.mark.parametrize(
    "path",
    [
        "tests.asgi.application",
        "tests.asgi_variants.protocol_router",
        "tests.asgi_variants.channels_middleware",
        "tests.asgi_variants.static_files",
        "tests.asgi_variants.starlette_style",
        "tests.asgi_variants.decorated",
    ],
)
def test_the_router_is_found_anywhere_in_the_chain_of_wrappers(path):
    assert project_errors(ASGI_APPLICATION=path) == []


@pytest.mark.parametrize("path", ["tests.asgi_variants.opaque", "tests.asgi_variants.url_router"])
def test_w172_when_the_chain_cannot_be_seen_into(path):
    [warning] = project_errors(ASGI_APPLICATION=path)
    assert warning.id == "mcp_django.W172"
    assert warning.hint


@needs_database_for_model_checks
def test_w172_is_reported_by_manage_py_check():
    with override_settings(ASGI_APPLICATION="tests.asgi_variants.opaque"):
        assert "mcp_django.W172" in manage_py_check()


def test_w004_wildcard_allowed_origin_in_deployment():
    with override_settings(MCP_DJANGO={**BASE, "ALLOWED_ORIGINS": ["*"]}):
        assert ids(check_deployment()) == ["mcp_django.W004"]


def test_w184_daphne_with_nothing_saying_a_proxy_is_in_front():
    [warning] = check_proxy()
    assert warning.id == "mcp_django.W184"
    assert "temporary file" in warning.msg and "SECURE_PROXY_SSL_HEADER" in warning.hint


@pytest.mark.parametrize(
    "proxy_setting",
    [
        {"SECURE_PROXY_SSL_HEADER": ("HTTP_X_FORWARDED_PROTO", "https")},
        {"USE_X_FORWARDED_HOST": True},
        {"USE_X_FORWARDED_PORT": True},
    ],
)
def test_w184_is_quiet_behind_a_proxy(proxy_setting):
    with override_settings(**proxy_setting):
        assert check_proxy() == []


def test_w184_is_quiet_without_daphne():
    with override_settings(INSTALLED_APPS=without_daphne()):
        assert check_proxy() == []


@needs_database_for_model_checks
def test_w184_is_reported_by_check_deploy_only():
    assert "mcp_django.W184" not in manage_py_check()
    assert "mcp_django.W184" in manage_py_check("--deploy")


@pytest.mark.parametrize("value", [42, None, "https://app.example"])
def test_deployment_check_survives_a_malformed_allowed_origins(value):
    # A wrong type is E006's business; the deployment check must not crash on it.
    with override_settings(MCP_DJANGO={**BASE, "ALLOWED_ORIGINS": value}):
        assert check_deployment() == []


def test_several_problems_are_reported_one_error_each():
    errors = settings_errors(RESPONSE_MODE="xml", PAGE_SIZE=0, NOPE=1)
    assert sorted(ids(errors)) == ["mcp_django.E002", "mcp_django.E003", "mcp_django.E005"]


def test_connect_provider_without_its_urls_is_e018():
    from django.test import override_settings

    from mcp_django.checks import check_settings

    with override_settings(
        MCP_DJANGO={"AUTHENTICATION": "none", "CONNECT_PROVIDERS": {"gh": {"client_id": "x"}}}
    ):
        assert [e.id for e in check_settings() if e.id == "mcp_django.E018"] == ["mcp_django.E018"]


def test_model_uri_scheme_that_is_not_a_scheme_is_e016():
    from django.test import override_settings

    from mcp_django.checks import check_settings

    with override_settings(
        MCP_DJANGO={"AUTHENTICATION": "none", "MODEL_URI_SCHEME": "Not A Scheme"}
    ):
        assert "mcp_django.E016" in [e.id for e in check_settings()]


def test_every_check_id_names_one_rule():
    """One id per kind of problem, so SILENCED_SYSTEM_CHECKS silences exactly one."""
    import re
    from collections import Counter
    from pathlib import Path

    import mcp_django

    source = "\n".join(p.read_text() for p in Path(mcp_django.__file__).parent.rglob("*.py"))
    counts = Counter(re.findall(r'id="(mcp_django\.[EW]\d+)"', source))
    assert counts and not [check_id for check_id, n in counts.items() if n > 1], counts


# --- where model permissions come from (W210, W211) -------------------------------------------

PLAIN_BACKEND = "tests.auth.plain_backends.EmailBackend"
SIGNED_IN = {**BASE, "AUTHENTICATION": "django"}


def test_w210_backends_that_cannot_grant_model_permissions_are_reported():
    with override_settings(MCP_DJANGO=SIGNED_IN, AUTHENTICATION_BACKENDS=[PLAIN_BACKEND]):
        [warning] = [m for m in check_sites() if m.id == "mcp_django.W210"]
    assert "ModelBackend" in warning.hint


def test_w210_is_silent_when_a_backend_has_has_perm():
    backends = [PLAIN_BACKEND, "django.contrib.auth.backends.ModelBackend"]
    with override_settings(MCP_DJANGO=SIGNED_IN, AUTHENTICATION_BACKENDS=backends):
        assert "mcp_django.W210" not in ids(check_sites())


def _hidden_in_trial(site: MCPSite) -> list[checks.CheckMessage]:
    with override_settings(MCP_DJANGO=BASE):
        return [m for m in check_sites() if m.id == "mcp_django.W211" and m.obj is site]


def test_w211_trial_mode_names_the_model_entries_no_anonymous_caller_sees():
    from tests.testapp.models import Note, Tag

    closed = MCPSite(name="closed-in-trial")
    closed.register(Tag)
    closed.register(Note)
    try:
        [warning] = _hidden_in_trial(closed)
    finally:
        closed.unregister(Tag)  # all_sites keeps the site until it is collected
        closed.unregister(Note)
    assert "2 model entries of the MCP site 'closed-in-trial' are hidden" in warning.msg
    assert "testapp.Note, testapp.Tag" in warning.msg
    assert "is_anonymous" in warning.hint


def test_w211_leaves_out_entries_opened_to_anonymous_callers():
    from tests.testapp.models import Note, Tag
    from tests.trial_mcp import TrialTagMCP

    opened = MCPSite(name="opened-in-trial")
    opened.register(Tag, TrialTagMCP)
    opened.register(Note)
    try:
        [warning] = _hidden_in_trial(opened)
    finally:
        opened.unregister(Tag)
        opened.unregister(Note)
    assert "testapp.Note" in warning.msg
    assert "testapp.Tag" not in warning.msg
