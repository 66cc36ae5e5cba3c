import secrets

from django.db import migrations, models

import playground.conversations.models


def give_each_link_its_own_nonce(apps, schema_editor):
    """AddField gave every existing row the same default: each gets a random one of its own."""
    ShareLink = apps.get_model("conversations", "ShareLink")
    for link in ShareLink.objects.only("pk"):
        ShareLink.objects.filter(pk=link.pk).update(nonce=secrets.token_urlsafe(16))


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0009_share_links'),
    ]

    operations = [
        migrations.AddField(
            model_name='sharelink',
            name='nonce',
            field=models.CharField(default=playground.conversations.models.share_link_nonce, editable=False, max_length=43),
        ),
        migrations.RunPython(give_each_link_its_own_nonce, migrations.RunPython.noop),
    ]
