"""The record of role changes; its Meta carries the role permissions (`accounts.role_<name>`)."""
from __future__ import annotations

from django.conf import settings
from django.db import models

from playground.access import ROLES, role_permission


class RoleChange(models.Model):
    """One role assignment made on the Users page: who changed whose role, from what to what."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="role_changes")
    changed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    before = models.CharField(max_length=20)  # the effective role before (a default role included)
    after = models.CharField(max_length=20)  # a role, or "" for "no role: the staff flag decides"
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        default_permissions = ("view",)
        # The permissions that make a role: the groups created by the data migration hold them.
        permissions = [(role_permission(role), f"Has the {role} role") for role in ROLES]

    def __str__(self) -> str:
        return f"{self.user}: {self.before} → {self.after or 'default'}"
