"""The four role groups, each holding its role's permission.

Idempotent: get-or-create everywhere, so running it again (or after Django's post_migrate made the
permissions) changes nothing, and permissions an operator added to a group are kept. The roles are
written out here rather than imported, so this migration keeps meaning what it meant when written.
"""
from django.db import migrations

ROLES = ("viewer", "operator", "editor", "admin")


def create_role_groups(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    Group = apps.get_model("auth", "Group")
    content_type, _ = ContentType.objects.get_or_create(app_label="accounts", model="rolechange")
    for role in ROLES:
        permission, _ = Permission.objects.get_or_create(
            content_type=content_type, codename=f"role_{role}", defaults={"name": f"Has the {role} role"}
        )
        group, _ = Group.objects.get_or_create(name=role)
        group.permissions.add(permission)


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0001_role_change"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    # Going back leaves the groups: deleting them would drop everyone's role.
    operations = [migrations.RunPython(create_role_groups, migrations.RunPython.noop)]
