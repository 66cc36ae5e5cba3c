"""A profile's learned ranking: trained in a Celery task, measured, and switched on only when it wins.

`start_training` adds a version (a `registry.LearnedRanking` row) and queues its task by name;
`execute_training` (the task's body) trains the engine's learner (engine/search/learned.py) on the
dev split of the profile's own labelled set, then measures the test split before and after — on
the team's set and on every shared toolset the evaluation page offers. `switch_on` is the gate: a
version goes live only when it beats the profile's backend on the team's test split (recall@5 or
top-1 up, nothing down) and loses nothing (top-1, MRR@10, recall@5, recall@10) on any shared test
split; otherwise it says why and nothing changes. Learning is off until then (the default).
"""
from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from playground.engine.search.learned import LearnedBackend, LearnedRanking as EngineRanking, train_ranking
from playground.engine.search.learning_eval import figures
from playground.engine.search.quality import evaluate_backend, load_toolset, select_queries, split_of
from playground.evaluation import selectors
from playground.evaluation.learning_gate import SwitchRefused, refusals
from playground.mcp_servers.secrets import scrub
from playground.queueing import queue_task
from playground.registry import backends, labelled_sets, learned_rankings
from playground.registry.models import AgentProfile, LearnedRanking

logger = logging.getLogger(__name__)

TRAIN_TASK = "evaluation.train_learned_ranking"  # tasks.py; queued by name


def start_training(profile: AgentProfile, user=None) -> LearnedRanking:
    """A new version of the profile's learned ranking, its training queued once the row is committed."""
    with transaction.atomic():
        # The profile row locked: two clicks at once get versions n and n + 1, not a clash.
        AgentProfile.objects.select_for_update().filter(pk=profile.pk).first()
        version = (profile.learned_rankings.aggregate(v=Max("version"))["v"] or 0) + 1
        row = LearnedRanking.objects.create(profile=profile, version=version, backend=profile.search_backend or "",
                                            created_by=user if getattr(user, "is_authenticated", False) else None,
                                            progress_message="queued")
    transaction.on_commit(lambda: _send(row.pk))
    return row


def _send(row_id: int) -> None:
    try:
        queue_task(TRAIN_TASK, row_id)
    except Exception as exc:
        logger.exception("could not queue the learned ranking %s", row_id)
        LearnedRanking.objects.filter(pk=row_id, status=LearnedRanking.Status.QUEUED).update(
            status=LearnedRanking.Status.FAILED, finished_at=timezone.now(),
            error=scrub(f"Could not hand the training to a worker (is Redis running?): {exc}"))


def shared_toolsets() -> list[str]:
    """The toolsets the evaluation page offers (the bundled one and TOOLSETS_DIR's), not the profiles' sets."""
    return selectors.available_toolsets()


def execute_training(row_id: int) -> LearnedRanking:
    """Train and measure one queued version (the task's body); a failure is kept on the row, said plainly."""
    claimed = LearnedRanking.objects.filter(pk=row_id, status=LearnedRanking.Status.QUEUED).update(
        status=LearnedRanking.Status.TRAINING, progress_message="reading the labelled set")
    row = LearnedRanking.objects.select_related("profile").get(pk=row_id)
    if not claimed:
        return row

    def say(message: str) -> None:
        LearnedRanking.objects.filter(pk=row_id).update(progress_message=message[:200])

    try:
        metrics, ranking = _train_and_measure(row, say)
    except Exception as exc:  # the page shows what went wrong; the worker keeps going
        logger.exception("learned ranking %s failed", row_id)
        LearnedRanking.objects.filter(pk=row_id).update(status=LearnedRanking.Status.FAILED, finished_at=timezone.now(),
                                                        progress_message="", error=scrub(f"{type(exc).__name__}: {exc}"))
        return LearnedRanking.objects.get(pk=row_id)
    LearnedRanking.objects.filter(pk=row_id).update(
        status=LearnedRanking.Status.READY, finished_at=timezone.now(), artefact=ranking.to_bytes(), metrics=metrics,
        encoder_id=ranking.encoder_id, progress_message="")
    return LearnedRanking.objects.get(pk=row_id)


def _train_and_measure(row: LearnedRanking, say) -> tuple[dict[str, Any], EngineRanking]:
    profile = row.profile
    catalog = labelled_sets.searchable_catalog(profile)
    queries = labelled_sets.engine_queries(profile, catalog)
    train = [q for q in queries if split_of(q.id) == "dev"]
    test = [q for q in queries if split_of(q.id) == "test"]
    if not train:
        raise ValueError("the profile's labelled set has no request in its dev split: label more searches first")
    backend = backends.search_backend(profile.search_backend or None)
    say(f"learning from {len(train)} labelled requests")
    ranking = train_ranking(backend, catalog, train)
    learned = LearnedBackend(backend, ranking)
    say(f"measuring the team's test split ({len(test)} requests)")
    team = {"train": len(train), "test": len(test), "before": None, "after": None}
    if test:
        team["before"] = figures(evaluate_backend(backend, catalog, test, toolset=labelled_sets.toolset_name(profile), split="test"))
        team["after"] = figures(evaluate_backend(learned, catalog, test, toolset=labelled_sets.toolset_name(profile), split="test"))
    shared = []
    limit = settings.LEARNED_RANKING_SHARED_LIMIT or None
    for name in shared_toolsets():
        say(f"measuring the shared toolset {name}")
        shared_catalog, shared_queries = load_toolset(name)
        chosen = select_queries(shared_queries, "test", limit)
        shared.append({"toolset": name, "queries": len(chosen),
                       "before": figures(evaluate_backend(backend, shared_catalog, chosen, toolset=name, split="test")),
                       "after": figures(evaluate_backend(learned, shared_catalog, chosen, toolset=name, split="test"))})
    cv = ranking.cross_validation
    return {"team": team, "shared": shared, "cross_validation": cv.to_dict() if cv else None,
            "learner_on": ranking.enabled, "reason": ranking.reason, "shared_limit": limit}, ranking


def switch_on(row: LearnedRanking) -> LearnedRanking:
    """Make `row` the profile's live version (any other goes off), or raise SwitchRefused saying why."""
    if row.status != LearnedRanking.Status.READY:
        raise SwitchRefused(f"Version {row.version} is {row.get_status_display().lower()}: only a trained version can be switched on.")
    reasons = refusals(row.metrics or {})
    if reasons:
        raise SwitchRefused(f"Version {row.version} stays off: " + "; ".join(reasons) + ".")
    with transaction.atomic():
        LearnedRanking.objects.filter(profile_id=row.profile_id, enabled=True).exclude(pk=row.pk).update(enabled=False)
        LearnedRanking.objects.filter(pk=row.pk).update(enabled=True)
    learned_rankings.reset_caches()
    row.refresh_from_db()
    return row


def switch_off(row: LearnedRanking) -> LearnedRanking:
    LearnedRanking.objects.filter(pk=row.pk).update(enabled=False)
    learned_rankings.reset_caches()
    row.refresh_from_db()
    return row
