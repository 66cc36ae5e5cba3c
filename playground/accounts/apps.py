from django.apps import AppConfig
from django.apps import apps as global_apps
from django.db.models.signals import post_migrate

ROLES = ("viewer", "operator", "editor", "admin")


def ensure_role_groups(sender, apps=global_apps, using="default", **kwargs) -> None:
    """The role groups and their permissions, as migration 0002 creates them. Also after every
    migrate and every flush (a test database emptied between transactional tests loses the data
    migration's rows; Django sends post_migrate after a flush). Idempotent: get-or-create."""
    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    Group = apps.get_model("auth", "Group")
    content_type, _ = ContentType.objects.using(using).get_or_create(app_label="accounts", model="rolechange")
    for role in ROLES:
        permission, _ = Permission.objects.using(using).get_or_create(
            content_type=content_type, codename=f"role_{role}", defaults={"name": f"Has the {role} role"}
        )
        group, _ = Group.objects.using(using).get_or_create(name=role)
        group.permissions.add(permission)


class AccountsConfig(AppConfig):
    name = "playground.accounts"
    label = "accounts"
    verbose_name = "Accounts and roles"

    def ready(self) -> None:
        post_migrate.connect(ensure_role_groups, sender=self, dispatch_uid="accounts.ensure_role_groups")
