from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    name = "playground.evaluation"
    verbose_name = "Search evaluation"
