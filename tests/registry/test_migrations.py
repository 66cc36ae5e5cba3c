from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)


def test_existing_rows_get_their_deferral_filled_in():
    executor = MigrationExecutor(connection)
    executor.migrate([("registry", "0002_tool_deferred_and_imports")])
    old_apps = executor.loader.project_state([("registry", "0002_tool_deferred_and_imports")]).apps
    Tool = old_apps.get_model("registry", "Tool")
    schema = {"type": "object", "properties": {}}
    Tool.objects.create(name="mcp__github__create_issue", input_schema=schema, server_name="github")
    Tool.objects.create(name="Read", input_schema=schema)
    Tool.objects.create(name="mcp__github__always", input_schema=schema, always_load=True)
    assert not Tool.objects.filter(deferred=True).exists()

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
    from playground.registry.models import Tool as CurrentTool

    assert set(CurrentTool.objects.filter(deferred=True).values_list("name", flat=True)) == {"mcp__github__create_issue"}
