from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("mcp_servers", "0004_sync_queued_at"),
    ]

    operations = [
        migrations.AddField(
            model_name="mcpserver",
            name="sync_heartbeat_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
