from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("registry", "0010_stored_search_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="searchindexbuild",
            name="queue_attempts",
            field=models.PositiveSmallIntegerField(default=0),
        ),
    ]
