"""Replay a conversation under another profile, search backend, vendor or wire style, and print it beside
its origin, turn by turn (the side-by-side page's figures; docs/conversations.md, "Replay and fork").

    python manage.py replay_conversation 12 --profile "Tool search on (native)" [--wire openai-client]
        [--backend bm25] [--provider demo] [--through 2] [--user alice] [--wait 300] [--json]
    python manage.py replay_conversation --figures 15 [--json]   # an existing replay's figures, nothing started

The replay runs through the Celery workers like any conversation (`make run` starts one); the command
waits for it with a deadline and prints the figures it has then.
"""
from __future__ import annotations

import json
import time
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from playground.access import OPERATOR, has_role
from playground.conversations import replays
from playground.conversations.models import Conversation
from playground.conversations.replay_figures import as_json, side_by_side
from playground.conversations.replay_forms import AS_ORIGIN, ReplayForm
from playground.registry.models import AgentProfile

POLL_SECONDS = 0.5
WIDTH = 13  # a column of the table: room for "+1,234,567,890"


class Command(BaseCommand):
    help = "Replay a conversation's messages with another profile, backend, vendor or wire style; print both side by side."

    def add_arguments(self, parser) -> None:
        parser.add_argument("conversation", nargs="?", type=int, help="the origin conversation's id")
        parser.add_argument("--profile", help="the profile's id or exact name (default: the origin's); 'default' for the default settings")
        parser.add_argument("--wire", default="", help="a vendor's wire style as `toolsearch request --wire` names it (default: the profile's own)")
        parser.add_argument("--provider", default=AS_ORIGIN, help="a provider key (default: the origin's)")
        parser.add_argument("--backend", default="", help="a search backend (default: the profile's own)")
        parser.add_argument("--through", type=int, help="re-send the person's messages 1..N (default: all)")
        parser.add_argument("--user", help="who replays (an operator at least; default: the origin's owner)")
        parser.add_argument("--wait", type=float, default=300.0, help="seconds to wait for the replay to finish (0: do not wait)")
        parser.add_argument("--figures", type=int, metavar="REPLAY", help="print an existing replay's figures; start nothing")
        parser.add_argument("--json", action="store_true", help="one JSON document instead of a table")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["figures"] is not None:
            replay = Conversation.objects.filter(pk=options["figures"], replay_plan__isnull=False).first()
            if replay is None:
                raise CommandError(f"conversation {options['figures']} is not a replay")
            return self.report(replay, options["json"], note="")
        if options["conversation"] is None:
            raise CommandError("name the conversation to replay (its id), or --figures REPLAY")
        origin = Conversation.objects.filter(pk=options["conversation"]).select_related("owner", "profile").first()
        if origin is None:
            raise CommandError(f"no conversation {options['conversation']}")
        user = self.replaying_user(origin, options["user"])
        data = {"profile": self.profile_id(origin, options["profile"]), "wire": options["wire"], "provider": options["provider"],
                "search_backend": options["backend"], "through": options["through"] or len(replays.person_messages(origin))}
        form = ReplayForm(data, origin=origin)
        if not form.is_valid():
            raise CommandError("; ".join(str(message) for messages in form.errors.values() for message in messages))
        try:
            replay = replays.start_replay(origin, user, form.choice())
        except replays.ReplayError as refused:
            raise CommandError(str(refused)) from None
        if not options["json"]:
            self.stdout.write(f"replay #{replay.pk} of #{origin.pk} started; waiting up to {options['wait']:g} s for the workers")
        self.report(replay, options["json"], note=self.wait(replay, options["wait"]))

    def replaying_user(self, origin: Conversation, name: str | None):
        user = origin.owner if not name else get_user_model().objects.filter(username=name).first()
        if user is None:
            raise CommandError(f"no user {name!r}")
        if not has_role(user, OPERATOR):
            raise CommandError(f"{user.get_username()} may not start conversations (an operator at least may replay)")
        return user

    @staticmethod
    def profile_id(origin: Conversation, value: str | None) -> str:
        if value is None:
            return str(origin.profile_id or "")
        if value == "default":
            return ""
        profile = AgentProfile.objects.filter(pk=int(value)).first() if value.isdigit() else AgentProfile.objects.filter(name=value).first()
        if profile is None:
            raise CommandError(f"no profile {value!r} (give its id or exact name)")
        return str(profile.pk)

    @staticmethod
    def wait(replay: Conversation, seconds: float) -> str:
        """Until every message was re-sent and answered, the replay stopped, or it waits on a person; what to say."""
        deadline = time.monotonic() + seconds
        while True:
            replay.refresh_from_db(fields=["status", "replay_plan", "heartbeat_at"])
            state = replays.progress(replay) or {}
            if state.get("done"):
                return ""
            if state.get("stopped"):
                return f"the replay stopped after message {state['sent']} of {state['planned']} ({replay.get_status_display().lower()})"
            if replay.status == Conversation.Status.WAITING:
                return "the replay waits for a permission answer (a call the origin did not answer): answer it on its page"
            if time.monotonic() >= deadline:
                unclaimed = replay.status == Conversation.Status.RUNNING and replay.heartbeat_at is None
                return (f"not finished after {seconds:g} s (message {state.get('sent', 0)} of {state.get('planned', 0)})"
                        + ("; no worker has taken it: is a Celery worker running (make run)?" if unclaimed else ""))
            time.sleep(POLL_SECONDS)

    def report(self, replay: Conversation, as_json_document: bool, *, note: str) -> None:
        origin = replay.replay_of
        figures = side_by_side(origin, replay)
        if as_json_document:
            self.stdout.write(json.dumps({"origin": replay.replay_plan.get("origin"), "replay": replay.pk, "status": replay.status,
                                          "progress": replays.progress(replay), "note": note, **as_json(figures)},
                                         ensure_ascii=False, indent=2))
            return
        if note:
            self.stdout.write(note)
        head = f"{'turn':>7}  {'side':<7}" + "".join(f"{title:>{WIDTH}}" for title in ("tool tokens", "input", "cache read", "cache write", "output", "cost $"))
        self.stdout.write(head)
        for row in figures["rows"]:
            label = f"{row['message']}·{row['turn']}" if row["message"] else "other"
            for side in ("origin", "replay"):
                self.stdout.write(f"{label:>7}  {side:<7}" + _cells(row[side]))
                label = ""
            if row["difference"]:
                self.stdout.write(f"{'':>7}  {'Δ':<7}" + _cells(row["difference"], signed=True))
        totals = figures["totals"]
        for side in ("origin", "replay", "difference"):
            if side in totals:
                self.stdout.write(f"{'total':>7}  {('Δ' if side == 'difference' else side):<7}"
                                  + _cells(totals[side], signed=side == "difference"))


def _cells(figures: dict[str, Any] | None, *, signed: bool = False) -> str:
    if not figures:
        return f"{'—':>{WIDTH}}"
    sign = "+" if signed else ""
    cost = figures.get("cost_usd")
    return ("".join(f"{figures[name]:>{sign}{WIDTH},}" for name in ("tool_tokens", "input", "cache_read", "cache_write", "output"))
            + (f"{'no price':>{WIDTH}}" if cost is None else f"{cost:>{sign}{WIDTH}.4f}"))
