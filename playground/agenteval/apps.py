from django.apps import AppConfig


class AgentEvalConfig(AppConfig):
    name = "playground.agenteval"
    verbose_name = "Agent task runs"
