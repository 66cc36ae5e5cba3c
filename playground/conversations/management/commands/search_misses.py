"""Where a profile's searches fail, on the command line (the "Search misses" page's figures).

    python manage.py search_misses --profile "Tool search on (native)" [--json] [--conversations 200]
    python manage.py search_misses --profile 3 --label   # add every labellable row to the profile's set
"""
from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from playground.conversations.search_misses import CONVERSATIONS_READ, profile_misses
from playground.registry import labelled_sets
from playground.registry.models import AgentProfile


class Command(BaseCommand):
    help = "List a profile's failed ToolSearch searches (empty, or the tool called next was not returned)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--profile", required=True, help="the profile's id or exact name")
        parser.add_argument("--conversations", type=int, default=CONVERSATIONS_READ, help="how many recent conversations to read")
        parser.add_argument("--json", action="store_true", help="one JSON document instead of lines")
        parser.add_argument("--label", action="store_true", help="add every row with a tool to the profile's labelled set")

    def handle(self, *args: Any, **options: Any) -> None:
        profile = _profile(options["profile"])
        if options["conversations"] < 1:
            raise CommandError("--conversations must be at least 1")
        report = profile_misses(profile, conversations=options["conversations"])
        added = 0
        if options["label"]:
            searchable = labelled_sets.searchable_names(profile)  # once, not once per row
            for row in report.rows:
                if row.labellable:
                    try:
                        _row, created = labelled_sets.add_labelled_query(profile, row.query, row.tool, conversation_id=row.conversation_ids[0],
                                                                         searchable=searchable)
                    except labelled_sets.LabelRefused as exc:
                        self.stderr.write(f"not labelled: {exc}")
                        continue
                    added += created
                    row.labelled = True
        counts = labelled_sets.split_counts(profile) if added else report.labelled_set
        if options["json"]:
            self.stdout.write(json.dumps({
                "profile": profile.name, "conversations": report.conversations, "keyword_searches": report.searches,
                "failed": report.failed, "empty": report.empty, "missed": report.missed, "backend": report.backend,
                "rank_depth": report.rank_depth, "labelled_set": counts, "labelled_now": added,
                "by_tool": dict(report.by_tool), "by_server": dict(report.by_server),
                "rows": [{"query": r.query, "kind": r.kind, "tool": r.tool, "returned": list(r.returned), "loaded_by": r.loaded_by,
                          "count": r.count, "rank_now": r.rank_now, "conversations": r.conversation_ids, "split": r.split,
                          "labelled": r.labelled} for r in report.rows],
            }, ensure_ascii=False, indent=2))
            return
        self.stdout.write(f"{profile.name}: {report.failed} failed of {report.searches} keyword searches in "
                          f"{report.conversations} conversations ({report.empty} empty, {report.missed} missed the tool called next); "
                          f"ranks now by {report.backend}, first {report.rank_depth} looked at")
        for row in report.rows:
            rank = "-" if not row.tool else f"#{row.rank_now}" if row.rank_now else f">{report.rank_depth}"
            mark = f" [{row.split}]" if row.labelled else ""
            self.stdout.write(f"  {row.count:>3}× {row.kind:<6} {rank:>4}  {row.query!r} → {row.tool or '(nothing called)'}{mark}")
        self.stdout.write(f"labelled set: {counts['dev']} dev, {counts['test']} test" + (f" ({added} added now)" if options["label"] else ""))


def _profile(value: str) -> AgentProfile:
    profile = AgentProfile.objects.filter(pk=int(value)).first() if value.isdigit() else AgentProfile.objects.filter(name=value).first()
    if profile is None:
        raise CommandError(f"no profile {value!r} (give its id or exact name)")
    return profile
