"""The Celery application. Workers: `celery -A playground.celery_app worker`."""
from __future__ import annotations

import os

from celery import Celery
from celery.signals import worker_process_shutdown

from playground import telemetry

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "playground.settings")

app = Celery("playground")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_process_shutdown.connect
def send_queued_spans(**_kwargs) -> None:
    """A worker process that stops sends the spans its batch processor still holds (docs/traces.md):
    a prefork child ends without running atexit handlers. Nothing when traces are off."""
    telemetry.shutdown()
