from django.apps import AppConfig


class InboxConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "playground.inbox"
    label = "inbox"
    verbose_name = "Prompt inbox"
