"""A profile's learned ranking in its searches: the version switched on, laid over the profile's backend.

Rows are `LearnedRanking` (trained and switched on by the evaluation app, which measures them); here
the search path reads which version is on. The artefact is loaded once per version and process, and
the wrapped backend kept per (version, backend instance), so a search costs no database read beyond
the one per conversation run that asks which version is on.
"""
from __future__ import annotations

import logging
import threading

from playground.engine.search.base import SearchBackend
from playground.engine.search.learned import LearnedBackend, LearnedRanking as EngineRanking, LearningUnavailable
from playground.registry.models import LearnedRanking

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_wrapped: dict[tuple[int, int], SearchBackend] = {}
_KEPT = 16


def active_ranking(profile_id: int | None) -> LearnedRanking | None:
    """The profile's version that is switched on (None: none is)."""
    if profile_id is None:
        return None
    return LearnedRanking.objects.filter(profile_id=profile_id, enabled=True, status=LearnedRanking.Status.READY).first()


def with_learned_ranking(profile_id: int | None, backend: SearchBackend) -> SearchBackend:
    """`backend`, re-ranked by the profile's learned ranking when one is switched on; else `backend` itself.
    A ranking this backend cannot use (another encoder, no dense side) is logged and left out."""
    row = active_ranking(profile_id)
    if row is None or not row.artefact:
        return backend
    key = (row.pk, id(backend))
    with _lock:
        wrapped = _wrapped.get(key)
    if wrapped is not None:
        return wrapped
    try:
        wrapped = LearnedBackend(backend, EngineRanking.from_bytes(bytes(row.artefact)))
    except (LearningUnavailable, ValueError) as exc:
        logger.warning("profile %s: learned ranking v%s not used: %s", profile_id, row.version, exc)
        return backend
    with _lock:
        _wrapped[key] = wrapped
        while len(_wrapped) > _KEPT:
            _wrapped.pop(next(iter(_wrapped)))
    return wrapped


def reset_caches() -> None:
    with _lock:
        _wrapped.clear()
