"""The project's own login page: email and password."""

from __future__ import annotations

from django.contrib.auth import authenticate, login
from django.http import HttpRequest, HttpResponse
from django.middleware.csrf import get_token
from django.shortcuts import redirect
from django.utils.html import escape


def login_view(request: HttpRequest) -> HttpResponse:
    error = ""
    if request.method == "POST":
        user = authenticate(
            request, username=request.POST.get("email"), password=request.POST.get("password")
        )
        if user is not None:
            login(request, user)
            return redirect("/")
        error = "<p>Wrong email or password.</p>"
    token = escape(get_token(request))
    return HttpResponse(
        f'{error}<form method="post"><input type="hidden" name="csrfmiddlewaretoken" value="{token}">'
        '<input name="email"><input name="password" type="password"><button>Sign in</button></form>'
    )
