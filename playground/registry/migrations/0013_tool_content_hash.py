"""`Tool.content_hash`: the engine's hash of each definition, kept in the row so that a process reading
100,000 tools back does not hash them all again for the catalog's fingerprint. Rows that existed
before get theirs here (the engine's own `Tool.content_hash`); a definition the engine rejects keeps ""."""
from __future__ import annotations

from django.db import migrations, models


def fill_content_hashes(apps, schema_editor):
    from playground.engine.tools import Tool as EngineTool
    from playground.engine.tools import ToolDefinitionError

    Tool = apps.get_model("registry", "Tool")
    changed = []
    for row in Tool.objects.only("id", "name", "description", "input_schema", "search_hint").iterator(chunk_size=2000):
        try:
            tool = EngineTool(name=row.name, description=row.description or "", input_schema=row.input_schema,
                              search_hint=row.search_hint or "")
        except ToolDefinitionError:
            continue
        row.content_hash = tool.content_hash
        changed.append(row)
        if len(changed) >= 2000:
            Tool.objects.bulk_update(changed, ["content_hash"], batch_size=500)
            changed = []
    Tool.objects.bulk_update(changed, ["content_hash"], batch_size=500)


class Migration(migrations.Migration):
    dependencies = [("registry", "0012_profile_prompt_cache")]
    operations = [
        migrations.AddField(model_name="tool", name="content_hash", field=models.CharField(blank=True, default="", max_length=40)),
        migrations.RunPython(fill_content_hashes, migrations.RunPython.noop),
    ]
