from __future__ import annotations

from django.urls import path

from playground.accounts import views

app_name = "accounts"
urlpatterns = [
    path("", views.users, name="users"),
    path("<int:pk>/role/", views.set_role, name="set_role"),
]
