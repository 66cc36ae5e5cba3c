from __future__ import annotations

from django.conf import settings
from django.db import models
from playground.storage_fields import StorableCharField, StorableJSONField, StorableTextField


class EvaluationRun(models.Model):
    """One evaluation of search backends over a toolset, run by a Celery task."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    toolset = StorableCharField(max_length=50)
    backends = StorableJSONField(default=list)
    query_style = StorableCharField(max_length=10, default="natural")
    status = StorableCharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    progress = models.FloatField(default=0.0)
    results = StorableJSONField(default=dict, blank=True)
    error = StorableTextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Added by the evaluation page (0002): which queries, what is happening now, who asked.
    split = StorableCharField(max_length=10, default="test")
    query_limit = models.PositiveIntegerField(null=True, blank=True, help_text="Evenly sampled queries; empty = all of the split")
    progress_message = StorableCharField(max_length=200, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # "dev": the dev split's queries stand in for a log of past searches (learning from usage, 0003).
    usage_from = StorableCharField(max_length=10, default="none")
    # When the run's task was handed to the broker (its request, or the last re-send) and how often it
    # was sent again because the broker lost it (playground/lost_tasks.py); a worker claims a queued
    # run by setting it running.
    queued_at = models.DateTimeField(null=True, blank=True)
    queue_attempts = models.PositiveSmallIntegerField(default=0)
    # Written every AGENT_HEARTBEAT_SECONDS by the worker running it (playground/heartbeat.py): a run
    # whose heartbeat is older than AGENT_LOST_SECONDS lost its worker and is failed by the sweep.
    heartbeat_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.toolset} · {', '.join(self.backends)} · {self.query_style} ({self.status})"

    @property
    def is_active(self) -> bool:
        return self.status in (self.Status.QUEUED, self.Status.RUNNING)

    @property
    def percent(self) -> int:
        return int(round(self.progress * 100))
