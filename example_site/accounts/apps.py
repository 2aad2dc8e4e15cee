from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """The example site as an OAuth authorization server: django-oauth-toolkit configured for
    MCP clients, its consent page, and the admin where users see and revoke what acts for them."""

    name = "example_site.accounts"
    label = "accounts"
    verbose_name = "Accounts and connected applications"

    def ready(self) -> None:
        from corsheaders.signals import check_request_enabled

        from .cors import metadata_is_public

        check_request_enabled.connect(metadata_is_public, dispatch_uid="example_site.accounts.cors")
