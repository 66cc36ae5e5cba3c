"""A gateway access token for scripts and CI: `manage.py gateway_token --profile ID|NAME --name NAME`.

Prints the new token on stdout, alone on its line, once (only its SHA-256 is stored, as for tokens
made on the tokens page), so `TOKEN=$(python manage.py gateway_token --profile 1 --name ci)` works;
the endpoint's path and how to revoke it go to stderr.
"""
from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from playground.gateway.endpoint import endpoint_path
from playground.gateway.tokens import issue_token
from playground.registry.models import AgentProfile

MAX_NAME_CHARS = 100  # GatewayToken.name


class Command(BaseCommand):
    help = "Create an access token for a profile's MCP gateway endpoint and print it (shown once)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--profile", required=True, help="the profile's id or its exact name")
        parser.add_argument("--name", required=True, help="who or what uses the token, e.g. 'CI'")

    def handle(self, *args, profile: str, name: str, **options) -> None:
        name = name.strip()
        if not name:
            raise CommandError("--name must not be empty: name the token after who uses it")
        if len(name) > MAX_NAME_CHARS:
            raise CommandError(f"--name is {len(name)} characters long; at most {MAX_NAME_CHARS}")
        row, token = issue_token(find_profile(profile), name)
        self.stdout.write(token)
        self.stderr.write(f"Token #{row.pk} ({row.prefix}…) for profile {row.profile_id} ({row.profile.name}); "
                          f"endpoint {endpoint_path(row.profile_id)}. Shown once: only its hash is stored. "
                          "Revoke it on the gateway's Access tokens page.")


def find_profile(wanted: str) -> AgentProfile:
    """By id when it is all digits (and such a profile exists), else by exact name."""
    wanted = wanted.strip()
    if wanted.isdigit() and len(wanted) <= 12:
        found = AgentProfile.objects.filter(pk=int(wanted)).first()
        if found is not None:
            return found
    found = AgentProfile.objects.filter(name=wanted).first()  # names are unique
    if found is not None:
        return found
    raise CommandError(f"no profile with the id or name {wanted!r}")
