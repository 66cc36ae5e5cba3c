from __future__ import annotations

from playground.celery_app import app
from playground.evaluation import services


@app.task(name="evaluation.run_evaluation")
def run_evaluation(run_id: int) -> str:
    return services.execute_run(run_id).status
