from django.contrib import admin
from django.urls import include, path

from tests.cronsite import views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("login/", views.login_view, name="login"),
    path("mcp/", include("mcp_django.urls")),
]
