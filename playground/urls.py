from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from playground import views

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("", include("playground.registry.urls")),
    path("mcp/", include("playground.mcp_servers.urls")),
    path("conversations/", include("playground.conversations.urls")),
    path("evaluation/", include("playground.evaluation.urls")),
    path("users/", include("playground.accounts.urls")),
]
