from __future__ import annotations

from playground.celery_app import app


@app.task(name="evaluation.run_evaluation")
def run_evaluation(run_id: int) -> str:
    from playground.evaluation.services import execute_run

    return execute_run(run_id).status
