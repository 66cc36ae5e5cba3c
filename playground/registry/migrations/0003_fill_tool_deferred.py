"""Fill `Tool.deferred` for rows that existed before the field (the engine's rule decides)."""
from __future__ import annotations

from django.db import migrations


def fill_deferred(apps, schema_editor):
    from playground.engine.tools import Tool as EngineTool
    from playground.engine.tools import ToolDefinitionError, is_deferred

    Tool = apps.get_model("registry", "Tool")
    changed = []
    for row in Tool.objects.select_related("server").iterator(chunk_size=1000):
        is_mcp = row.name.startswith("mcp__")
        try:
            tool = EngineTool(
                name=row.name, description=row.description or "", input_schema=row.input_schema,
                search_hint=row.search_hint or "", is_mcp=is_mcp,
                server=((row.server.name if row.server_id else row.server_name) or None) if is_mcp else None,
                should_defer=row.should_defer, always_load=row.always_load,
            )
        except ToolDefinitionError:
            continue
        if is_deferred(tool) != row.deferred:
            row.deferred = not row.deferred
            changed.append(row)
    Tool.objects.bulk_update(changed, ["deferred"], batch_size=500)


class Migration(migrations.Migration):
    dependencies = [("registry", "0002_tool_deferred_and_imports")]
    operations = [migrations.RunPython(fill_deferred, migrations.RunPython.noop)]
