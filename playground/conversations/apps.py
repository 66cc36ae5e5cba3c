from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    name = "playground.conversations"
    verbose_name = "Conversations"
