"""Pages that finish URL-mode elicitations, as ordinary Django class-based views.

Subclass :class:`ElicitationView` for pages of your own; the ready ones ask for a secret for
another service and confirm an action. Each requires login as the user who triggered the
elicitation, answers the same 404 for unknown, foreign, used and expired ids, is CSRF-protected
and works without JavaScript.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib.auth.mixins import LoginRequiredMixin
from django.http import Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.utils.decorators import method_decorator
from django.utils.translation import gettext_lazy as _
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_protect
from django.views.generic import FormView

from ..models import Elicitation
from . import services

if TYPE_CHECKING:
    _FormView = FormView[forms.Form]
else:
    _FormView = FormView  # generic in django-stubs only: Django's FormView is not subscriptable


@method_decorator([csrf_protect, never_cache], name="dispatch")
class ElicitationView(LoginRequiredMixin, _FormView):
    """Base page of one elicitation. Subclasses set ``form_class`` and implement
    :meth:`complete`."""

    #: The MCP site, when the page is one of a site's own (``as_view(site=site)``).
    site: Any = None
    #: The page: the elicitation's message, the form, and Continue and Decline buttons.
    template_name = "mcp_django/elicitation/form.html"
    #: Shown once the page is finished, whatever the outcome.
    done_template_name = "mcp_django/elicitation/done.html"
    form_class: type[forms.Form] = forms.Form
    elicitation: Elicitation

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not request.user.is_authenticated:
            return self.handle_no_permission()  # to the login page, and back here after
        elicitation = services.open_for(kwargs["elicitation_id"], request.user)
        if elicitation is None or not self.accepts(elicitation):
            raise Http404("No such request")
        self.elicitation = elicitation
        return super().dispatch(request, *args, **kwargs)

    # -- subclass implementation -----------------------------------------------------------

    def complete(self, form: forms.Form) -> str:
        """Do the page's work with the valid form; return the final state (usually completed)."""
        raise NotImplementedError(
            "ElicitationView subclasses must implement complete(form) -> state"
        )

    def accepts(self, elicitation: Elicitation) -> bool:
        """Whether this page serves ``elicitation`` (its target view is this page)."""
        return (
            self.request.resolver_match is not None
            and elicitation.view_name.split(":")[-1] == self.request.resolver_match.url_name
        )

    # -- shouldn't need to override ------------------------------------------------------------

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context.update(
            elicitation=self.elicitation, params=self.elicitation.params, title=self.get_title()
        )
        return context

    def get_title(self) -> str:
        """The page's title and heading."""
        return str(_("A request from your AI assistant"))

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if "decline" in request.POST:
            return self.finish(Elicitation.State.DECLINED)
        return super().post(request, *args, **kwargs)

    def form_valid(self, form: forms.Form) -> HttpResponse:
        return self.finish(self.complete(form))

    def finish(self, state: str) -> HttpResponse:
        """Close the elicitation in ``state``, tell the waiting tool and the client, and show the
        done page."""
        services.finish(self.elicitation, state)
        context = {"elicitation": self.elicitation, "state": state, "title": self.get_title()}
        return self.response_class(
            request=self.request,
            template=[self.done_template_name],
            context=context,
            using=self.template_engine,
        )


class SecretForm(forms.Form):
    secret = forms.CharField(
        label=_("Secret"),
        max_length=4096,
        strip=True,
        widget=forms.PasswordInput(attrs={"autocomplete": "off", "autofocus": True}),
    )


class SecretElicitationView(ElicitationView):
    """Ask the user for a secret for another service (``params["service"]``) and store it
    encrypted for them; tools read it with ``await ctx.get_secret(service)``."""

    form_class = SecretForm
    template_name = "mcp_django/elicitation/secret.html"

    def get_title(self) -> str:
        return str(
            _("Connect %(service)s")
            % {
                "service": self.elicitation.params.get("label")
                or self.elicitation.params.get("service", "")
            }
        )

    def accepts(self, elicitation: Elicitation) -> bool:
        return super().accepts(elicitation) and bool(elicitation.params.get("service"))

    def complete(self, form: forms.Form) -> str:
        services.store_secret(
            self.request.user, self.elicitation.params["service"], form.cleaned_data["secret"]
        )
        return Elicitation.State.COMPLETED


class ConfirmElicitationView(ElicitationView):
    """Ask the user to confirm (or decline) an action described by the elicitation's message."""

    template_name = "mcp_django/elicitation/confirm.html"

    def get_title(self) -> str:
        return str(_("Confirm an action"))

    def complete(self, form: forms.Form) -> str:
        return Elicitation.State.COMPLETED
