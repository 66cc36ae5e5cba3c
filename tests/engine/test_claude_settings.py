"""Claude Code's permission settings read into the playground's rules, and written back."""
from __future__ import annotations

import json

import pytest

from playground.engine.claude_settings import SettingsFormatError, read_permission_settings, write_permission_settings

SETTINGS = {
    "permissions": {
        "allow": ["mcp__github", "Read", "Bash(npm run test:*)", "WebFetch(*)", "mcp__github"],
        "ask": ["mcp__github__push_files", "Write()"],
        "deny": ["mcp__slack__*", "Read(./.env)", "mcp__*", 42],
        "additionalDirectories": ["../docs"],
    },
    "env": {"FOO": "bar"},
}


def test_names_servers_and_wildcards_map_and_argument_rules_are_reported_not_widened():
    read = read_permission_settings(json.dumps(SETTINGS))
    assert read.rules == [("allow", "mcp__github"), ("allow", "Read"), ("allow", "WebFetch"),
                          ("ask", "mcp__github__push_files"), ("ask", "Write"), ("deny", "mcp__slack__*")]
    unmapped = {(u.effect, u.entry): u.reason for u in read.unmapped}
    assert "an argument rule (Bash only for “npm run test:*”)" in unmapped[("allow", "Bash(npm run test:*)")]
    assert "an argument rule (Read only for “./.env”)" in unmapped[("deny", "Read(./.env)")]
    assert "the only wildcard form is mcp__<server>__*" in unmapped[("deny", "mcp__*")]
    assert unmapped[("deny", "42")] == "not a rule (rules are strings)"
    assert "only allow, ask and deny are read" in unmapped[("", "permissions.additionalDirectories")]


def test_what_is_written_reads_back_the_same():
    rules = [("deny", "mcp__slack__*"), ("allow", "Read"), ("allow", "mcp__github"), ("ask", "Write"), ("allow", "Read")]
    written = write_permission_settings(rules)
    assert written == {"permissions": {"allow": ["Read", "mcp__github"], "ask": ["Write"], "deny": ["mcp__slack__*"]}}
    assert sorted(read_permission_settings(json.dumps(written)).rules) == sorted(set(rules))


@pytest.mark.parametrize("text, message", [
    ("not json", "not JSON"),
    ("[]", "a settings file is a JSON object"),
    ('{"env": {}}', 'no "permissions" key'),
    ('{"permissions": []}', '"permissions" must be an object'),
    ('{"permissions": {"allow": "Read"}}', '"permissions.allow" must be a list'),
    ("{" + " " * 1_000_001 + "}", "over 1000 KB"),
])
def test_a_file_that_is_not_settings_says_why(text, message):
    with pytest.raises(SettingsFormatError, match=message):
        read_permission_settings(text)
