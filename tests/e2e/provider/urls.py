from django.contrib.auth import views as auth_views
from django.urls import path
from oauth2_provider import views as oauth2_views

from .views import reading_list

urlpatterns = [
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("o/authorize/", oauth2_views.AuthorizationView.as_view(), name="authorize"),
    path("o/token/", oauth2_views.TokenView.as_view(), name="token"),
    path("api/reading-list/", reading_list, name="reading-list"),
]
