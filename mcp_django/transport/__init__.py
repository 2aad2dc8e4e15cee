"""The HTTP side: the only code that knows ASGI scopes, HTTP requests and channel layers."""
