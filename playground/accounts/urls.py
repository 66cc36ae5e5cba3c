from __future__ import annotations

from django.urls import path

from playground.access import ADMIN, allow
from playground.accounts import views

app_name = "accounts"
# Who may use each route (see playground/urls.py).
access_rules = {
    "users": allow(get=ADMIN),
    "set_role": allow(post=ADMIN),
    "create_user": allow(post=ADMIN),
}
urlpatterns = [
    path("", views.users, name="users"),
    path("<int:pk>/role/", views.set_role, name="set_role"),
    path("new/", views.create_user, name="create_user"),
]
