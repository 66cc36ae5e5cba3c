from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from playground.registry import services
from playground.registry.models import Tool, ToolImport

from .conftest import make_tool

pytestmark = pytest.mark.django_db
IMPORT = reverse("registry:tool_import")


def jsonl(*records) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def record(name, description="A tool", **extra):
    return {"name": name, "description": description, "input_schema": {"type": "object", "properties": {}}, **extra}


def preview(client, text, **extra):
    return client.post(IMPORT, {"text": text, **extra})


def commit(client, staged):
    return client.post(reverse("registry:tool_import_commit", args=[staged.pk]))


def test_preview_sorts_tools_into_new_changed_and_unchanged(admin_client):
    make_tool("mcp__a__same", "Same text")
    make_tool("mcp__a__edited", "Old text")
    text = jsonl(record("mcp__a__same", "Same text", server="a"), record("mcp__a__edited", "New text", server="a"),
                 record("mcp__a__brand_new", server="a"))
    response = preview(admin_client, text)
    assert response.status_code == 200
    summary = response.context["preview"].summary()
    assert summary == {"new": 1, "changed": 1, "unchanged": 1, "invalid": 0}
    body = response.content.decode()
    assert 'data-state="ready"' in body and 'data-testid="import-commit"' in body
    assert Tool.objects.count() == 2  # nothing imported by the preview


def test_commit_creates_and_updates_in_one_go(admin_client):
    make_tool("mcp__a__edited", "Old text", enabled=False, always_load=True)
    preview(admin_client, jsonl(record("mcp__a__edited", "New text", server="a"), record("mcp__a__fresh", "Fresh", server="a")))
    staged = ToolImport.objects.get()
    response = commit(admin_client, staged)
    assert response.status_code == 302
    edited = Tool.objects.get(name="mcp__a__edited")
    assert edited.description == "New text"
    assert edited.enabled is False and edited.always_load is True  # local choices kept
    fresh = Tool.objects.get(name="mcp__a__fresh")
    assert fresh.source == Tool.Source.IMPORTED and fresh.server_name == "a" and fresh.deferred and fresh.token_estimate > 0
    staged.refresh_from_db()
    assert staged.status == ToolImport.Status.COMMITTED
    assert commit(admin_client, staged).status_code == 302  # a second commit is refused, changes nothing
    assert Tool.objects.count() == 2


def test_a_bad_line_is_reported_and_nothing_is_imported(admin_client):
    make_tool("mcp__a__edited", "Old text")
    text = jsonl(record("mcp__a__edited", "New text"), record("mcp__a__ok")) + '{"name": "bad name!", "input_schema": {}}\n' + \
        json.dumps(record("mcp__a__string_schema", input_schema={"type": "string"})) + "\n"
    response = preview(admin_client, text)
    invalid = response.context["preview"].invalid
    assert [i.where for i in invalid] == ["line 3", "line 4"]
    assert "bad name!" in invalid[0].reason
    assert "object" in invalid[1].reason
    body = response.content.decode()
    assert 'data-state="invalid"' in body and 'data-testid="import-commit"' not in body
    staged = ToolImport.objects.get()
    assert staged.status == ToolImport.Status.REJECTED
    commit(admin_client, staged)
    assert Tool.objects.get(name="mcp__a__edited").description == "Old text"
    assert not Tool.objects.filter(name="mcp__a__ok").exists()


def test_a_failure_during_commit_rolls_everything_back(admin_client, monkeypatch):
    make_tool("mcp__a__edited", "Old text")
    preview(admin_client, jsonl(record("mcp__a__edited", "New text"), record("mcp__a__fresh")))
    staged = ToolImport.objects.get()

    def explode(*args, **kwargs):
        raise RuntimeError("database went away")

    monkeypatch.setattr(Tool.objects, "bulk_update", explode)
    with pytest.raises(RuntimeError):
        services.commit_import(staged)
    assert not Tool.objects.filter(name="mcp__a__fresh").exists()  # created rows rolled back too
    assert Tool.objects.get(name="mcp__a__edited").description == "Old text"
    staged.refresh_from_db()
    assert staged.status == ToolImport.Status.PREVIEWED


def test_duplicate_names_in_one_file_are_invalid(admin_client):
    response = preview(admin_client, jsonl(record("mcp__a__x"), record("mcp__a__x")))
    reasons = [i.reason for i in response.context["preview"].invalid]
    assert any("duplicate" in r for r in reasons)


@pytest.mark.parametrize(
    ("payload", "extra", "expected"),
    [
        (json.dumps([{"name": "get_weather", "description": "Weather", "input_schema": {"type": "object", "properties": {}}}]),
         {}, "get_weather"),
        (json.dumps([{"type": "function", "function": {"name": "get_time", "description": "Time",
                                                        "parameters": {"type": "object", "properties": {}}}}]),
         {}, "get_time"),
        (json.dumps({"tools": [{"name": "convert_time", "description": "Convert",
                                "inputSchema": {"type": "object", "properties": {}}}]}),
         {"server_name": "time"}, "mcp__time__convert_time"),
    ],
    ids=["anthropic", "openai", "mcp-tools-list"],
)
def test_it_reads_every_supported_format(admin_client, payload, extra, expected):
    response = preview(admin_client, payload, **extra)
    assert [t.name for t in response.context["preview"].new] == [expected]
    commit(admin_client, ToolImport.objects.get())
    assert Tool.objects.filter(name=expected).exists()


def test_upload_a_file(admin_client):
    upload = SimpleUploadedFile("catalog.jsonl", jsonl(record("mcp__f__one"), record("mcp__f__two")).encode())
    response = admin_client.post(IMPORT, {"file": upload})
    assert response.context["preview"].summary()["new"] == 2
    assert ToolImport.objects.get().filename == "catalog.jsonl"


def test_text_is_never_read_as_a_path_on_the_server(admin_client, tmp_path):
    secret = tmp_path / "catalog.jsonl"
    secret.write_text(jsonl(record("mcp__secret__tool")))
    response = preview(admin_client, str(secret))
    assert not response.context["preview"].new
    assert response.context["preview"].invalid


def test_htmx_preview_returns_the_fragment(admin_client):
    response = admin_client.post(IMPORT, {"text": jsonl(record("mcp__h__x"))}, headers={"HX-Request": "true"})
    body = response.content.decode()
    assert 'data-testid="import-preview"' in body and "<html" not in body


def test_empty_input_shows_an_error(admin_client):
    response = admin_client.post(IMPORT, {"text": "  "})
    assert response.status_code == 400
    assert "Upload a file or paste a catalog." in response.content.decode()


def test_viewer_cannot_import(viewer_client):
    assert viewer_client.get(IMPORT).status_code == 403
    assert viewer_client.post(IMPORT, {"text": jsonl(record("mcp__v__x"))}).status_code == 403
    assert not ToolImport.objects.exists()


@pytest.mark.parametrize("fmt", ["jsonl", "anthropic", "openai", "mcp"])
def test_export_round_trips_through_import(viewer_client, tools, fmt):
    response = viewer_client.get(reverse("registry:tool_export"), {"format": fmt, "server": "github"})
    assert response.status_code == 200
    assert "attachment" in response["Content-Disposition"]
    text = response.content.decode()
    result = services.preview_import(text, server_name="github" if fmt == "mcp" else "")
    assert not result.invalid
    names = {t.name for t in result.unchanged + result.new + [t for t, _ in result.changed]}
    assert names == {"mcp__github__create_issue", "mcp__github__list_issues", "mcp__github__delete_repo"}
    if fmt == "jsonl":
        assert len(result.unchanged) == 3


def test_unknown_export_format_is_404(viewer_client):
    assert viewer_client.get(reverse("registry:tool_export"), {"format": "xml"}).status_code == 404


def test_a_broken_json_document_gets_one_error_with_its_line(admin_client):
    text = '{\n  "tools": [\n    {"name": "a", "inputSchema": {"type": "object"}},\n    {"name": "b",,}\n  ]\n}\n'
    invalid = preview(admin_client, text, server_name="x").context["preview"].invalid
    assert len(invalid) == 1
    assert invalid[0].where == "file" and "line 4" in invalid[0].reason


def test_every_bad_item_of_an_mcp_result_is_named(admin_client):
    document = {"jsonrpc": "2.0", "id": 1, "result": {"tools": [
        {"name": "good", "inputSchema": {"type": "object", "properties": {}}},
        {"name": "bad one", "inputSchema": {"type": "object", "properties": {}}},
        {"name": "worse", "inputSchema": {"type": "array"}},
    ]}}
    invalid = preview(admin_client, json.dumps(document), server_name="srv").context["preview"].invalid
    assert [i.where for i in invalid] == ["tools[1]", "tools[2]"]


def test_an_mcp_tools_list_without_a_server_name_is_refused_with_the_reason(admin_client):
    # Its names are bare: without a server they used to become mcp__imported__<tool> silently.
    document = {"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "convert_time", "inputSchema": {"type": "object"}}]}}
    for payload in (json.dumps(document), json.dumps(document["result"])):
        response = preview(admin_client, payload)
        assert response.status_code == 400
        assert "This is an MCP tools/list result" in response.content.decode()
    assert not ToolImport.objects.exists() and not Tool.objects.filter(name__startswith="mcp__imported__").exists()
    # An Anthropic {"tools": [...]} document carries full names and needs no server.
    anthropic = json.dumps({"tools": [record("get_weather")]})
    assert preview(admin_client, anthropic).status_code == 200


def test_stale_previews_are_forgotten(admin_client):
    from datetime import timedelta

    from django.utils import timezone

    preview(admin_client, jsonl(record("mcp__old__x")))
    ToolImport.objects.update(created_at=timezone.now() - timedelta(days=2))
    preview(admin_client, jsonl(record("mcp__new__x")))
    assert ToolImport.objects.count() == 1


def test_a_catalog_with_nothing_new_or_changed_offers_no_import(admin_client):
    make_tool("mcp__a__same", "Same text")
    body = preview(admin_client, jsonl(record("mcp__a__same", "Same text", server="a"))).content.decode()
    assert 'data-testid="import-nothing"' in body and "already in the registry" in body
    assert '<button class="primary" type="button" disabled data-testid="import-commit">' in body
    assert "tool_import_commit" not in body and "/commit" not in body  # no form to post
