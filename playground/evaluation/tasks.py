from __future__ import annotations

from playground.celery_app import app
from playground.evaluation import learning, services


@app.task(name="evaluation.run_evaluation")
def run_evaluation(run_id: int) -> str:
    return services.execute_run(run_id).status


@app.task(name="evaluation.train_learned_ranking")
def train_learned_ranking(row_id: int) -> str:
    return learning.execute_training(row_id).status
