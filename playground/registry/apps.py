from django.apps import AppConfig


class RegistryConfig(AppConfig):
    name = "playground.registry"
    verbose_name = "Tool registry"
