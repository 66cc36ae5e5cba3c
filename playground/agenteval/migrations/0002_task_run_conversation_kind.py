from django.db import migrations


def mark_task_run_conversations(apps, schema_editor):
    """A task run's conversations say so: the usage overview splits interactive use from task runs."""
    items = apps.get_model("agenteval", "TaskRunItem").objects.exclude(conversation=None)
    apps.get_model("conversations", "Conversation").objects.filter(
        pk__in=items.values("conversation_id")).update(kind="task_run")


class Migration(migrations.Migration):

    dependencies = [
        ("agenteval", "0001_initial"),
        ("conversations", "0012_usage_kind_and_budgets"),
    ]

    operations = [migrations.RunPython(mark_task_run_conversations, migrations.RunPython.noop)]
