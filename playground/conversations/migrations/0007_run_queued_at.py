from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0006_cancelled_status'),
    ]

    operations = [
        migrations.AddField(
            model_name='conversation',
            name='queued_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='conversation',
            name='queue_attempts',
            field=models.PositiveSmallIntegerField(default=0),
        ),
    ]
