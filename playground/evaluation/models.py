from __future__ import annotations

from django.db import models


class EvaluationRun(models.Model):
    """One evaluation of search backends over a toolset, run by a Celery task."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    toolset = models.CharField(max_length=50)
    backends = models.JSONField(default=list)
    query_style = models.CharField(max_length=10, default="natural")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    progress = models.FloatField(default=0.0)
    results = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
