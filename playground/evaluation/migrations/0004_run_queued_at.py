from django.db import migrations, models
from django.db.models import F


def queued_at_from_created_at(apps, schema_editor):
    EvaluationRun = apps.get_model("evaluation", "EvaluationRun")
    EvaluationRun.objects.filter(queued_at__isnull=True).update(queued_at=F("created_at"))


class Migration(migrations.Migration):

    dependencies = [
        ("evaluation", "0003_usage_from"),
    ]

    operations = [
        migrations.AddField(
            model_name="evaluationrun",
            name="queued_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="evaluationrun",
            name="queue_attempts",
            field=models.PositiveSmallIntegerField(default=0),
        ),
        migrations.RunPython(queued_at_from_created_at, migrations.RunPython.noop),
    ]
