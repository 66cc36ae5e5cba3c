"""Create the playground admin on first run (username PLAYGROUND_ADMIN_USERNAME).

The password is PLAYGROUND_ADMIN_PASSWORD when set; otherwise one is generated and printed once.
An existing account is left alone (its password is never printed or changed).
"""
from __future__ import annotations

import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create the playground admin account if it does not exist."

    def handle(self, *args: Any, **options: Any) -> None:
        username = settings.PLAYGROUND_ADMIN_USERNAME
        User = get_user_model()
        if User.objects.filter(username=username).exists():
            self.stdout.write(f"Admin account {username!r} exists; log in with its password.")
            return
        password = settings.PLAYGROUND_ADMIN_PASSWORD
        generated = not password
        if generated:
            password = secrets.token_urlsafe(12)
        User.objects.create_superuser(username=username, email="", password=password)
        if generated:
            self.stdout.write(f"Created admin account {username!r} with password {password} (shown once; "
                              "set PLAYGROUND_ADMIN_PASSWORD to choose it).")
        else:
            self.stdout.write(f"Created admin account {username!r} with the password from PLAYGROUND_ADMIN_PASSWORD.")
