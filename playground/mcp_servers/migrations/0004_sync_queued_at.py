from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("mcp_servers", "0003_workbench_log_and_history"),
    ]

    operations = [
        migrations.AddField(
            model_name="mcpserver",
            name="sync_queued_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="mcpserver",
            name="sync_attempts",
            field=models.PositiveSmallIntegerField(default=0),
        ),
    ]
