"""Django's admin creates accounts too: a new one starts as viewer, as on the Users page."""
from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin

from playground.accounts import services

User = get_user_model()


class PlaygroundUserAdmin(UserAdmin):
    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        if not change:
            services.give_new_account_the_least_role(obj)


if admin.site.is_registered(User):
    admin.site.unregister(User)
admin.site.register(User, PlaygroundUserAdmin)
