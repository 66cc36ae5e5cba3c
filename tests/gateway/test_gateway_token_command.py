"""`manage.py gateway_token`: a new token printed once, stored hashed, usable on the endpoint."""
from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from playground.gateway.models import GatewayToken
from playground.gateway.tokens import authenticate, hash_token
from playground.registry.models import AgentProfile

pytestmark = pytest.mark.django_db


def run(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("gateway_token", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_a_token_by_profile_id_or_name_is_printed_once_and_stored_hashed():
    profile = AgentProfile.objects.create(name="CI profile", tool_search_mode="true")
    out, err = run("--profile", str(profile.pk), "--name", "ci")
    token = out.strip()
    assert token.startswith("tsg_") and out.count("\n") == 1  # the token alone on stdout
    row = GatewayToken.objects.get()
    assert (row.name, row.profile_id, row.token_hash) == ("ci", profile.pk, hash_token(token))
    assert token not in err and row.prefix in err and f"/gateway/mcp/{profile.pk}/" in err
    assert authenticate(profile.pk, f"Bearer {token}")[0] == row

    by_name, _ = run("--profile", "CI profile", "--name", "nightly")
    assert by_name.strip() != token and GatewayToken.objects.filter(profile=profile).count() == 2


@pytest.mark.parametrize("args, message", [
    (["--profile", "nope", "--name", "x"], "no profile"),
    (["--profile", "999999", "--name", "x"], "no profile"),
    (["--profile", "CI profile", "--name", "  "], "must not be empty"),
    (["--profile", "CI profile", "--name", "x" * 101], "at most 100"),
])
def test_bad_arguments_are_clear_errors_and_issue_nothing(args, message):
    AgentProfile.objects.create(name="CI profile", tool_search_mode="true")
    with pytest.raises(CommandError, match=message):
        run(*args)
    assert not GatewayToken.objects.exists()

