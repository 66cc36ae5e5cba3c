from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("evaluation", "0004_run_queued_at"),
    ]

    operations = [
        migrations.AddField(
            model_name="evaluationrun",
            name="heartbeat_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
