"""A second, separate Django project for the e2e tests: "Bookshelf", an OAuth 2.1 authorization
server (django-oauth-toolkit) with one protected API, run on loopback by test_url_elicitation.py.

The example site connects users to it through a URL elicitation (``CONNECT_PROVIDERS``). Every
request it receives is written to an access log with its headers and body, so the test can show
that no MCP credential ever reaches it.
"""
