from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    name = "playground.conversations"
    verbose_name = "Conversations"

    def ready(self) -> None:
        # Registry pages show the usage log and the model providers, which this app owns; the registry
        # sits below and must not import them, so they are handed in here. (Imported in ready():
        # these modules import models, which exist only once the app registry is ready.)
        from playground.conversations import providers, usage
        from playground.registry import ports

        ports.register(usage=usage, providers=providers)
