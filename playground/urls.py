from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from playground import views
from playground.access import PUBLIC, VIEWER, allow, delegated

# Who may use each route, by name (tests/test_authorisation_matrix.py requests every route with every
# role and checks these): a route without a rule here or in its app's urls.py fails the suite.
access_rules = {
    "home": allow(get=VIEWER),
    "healthz": allow(get=PUBLIC),
    "favicon": allow(get=PUBLIC),
    "login": allow(get=PUBLIC, post=PUBLIC),
    "logout": allow(post=PUBLIC),
    # Django's admin site checks its own access: the staff flag, then model permissions (superusers all).
    "admin": delegated("Django's admin: is_staff and model permissions"),
}

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("favicon.ico", views.favicon, name="favicon"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("", include("playground.registry.urls")),
    path("mcp/", include("playground.mcp_servers.urls")),
    path("conversations/", include("playground.conversations.urls")),
    path("evaluation/", include("playground.evaluation.urls")),
    path("agent-eval/", include("playground.agenteval.urls")),
    path("gateway/", include("playground.gateway.urls")),
    path("inbox/", include("playground.inbox.urls")),
    path("users/", include("playground.accounts.urls")),
]
