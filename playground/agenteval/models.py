"""Task sets, tasks and task runs: does the agent still pick and call the right tool under a profile?"""
from __future__ import annotations

from django.conf import settings
from django.db import models

from playground.storage_fields import StorableCharField, StorableJSONField, StorableTextField


class TaskSet(models.Model):
    """Labelled tasks: a person's request and the tools that would satisfy it."""

    class Source(models.TextChoices):
        TOOLSET = "toolset", "A toolset's labelled queries"
        UPLOAD = "upload", "An uploaded JSONL"
        CONVERSATIONS = "conversations", "Saved from conversations"

    name = StorableCharField(max_length=100, unique=True)
    source = StorableCharField(max_length=20, choices=Source.choices)
    # The catalog the tasks were labelled on (a toolset's name), empty when they were saved from this
    # registry's own conversations: a run checks the registry holds its gold tools.
    catalog = StorableCharField(max_length=100, blank=True)
    description = StorableTextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Task(models.Model):
    task_set = models.ForeignKey(TaskSet, on_delete=models.CASCADE, related_name="tasks")
    external_id = StorableCharField(max_length=100)
    query = StorableTextField()
    expected_tools = StorableJSONField(default=list)
    equivalent_names = StorableJSONField(default=dict, blank=True)
    category = StorableCharField(max_length=100, blank=True)
    split = StorableCharField(max_length=4, default="test")  # dev | test, as the search evaluation splits
    position = models.PositiveIntegerField(default=0)
    source_conversation = models.ForeignKey("conversations.Conversation", null=True, blank=True, on_delete=models.SET_NULL,
                                            related_name="+")

    class Meta:
        ordering = ["task_set_id", "position", "id"]
        constraints = [models.UniqueConstraint(fields=["task_set", "external_id"], name="unique_task_id_per_set")]

    def __str__(self) -> str:
        return self.query[:80]


class TaskRun(models.Model):
    """N tasks × M profiles, each pair one conversation through the real loop."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        CANCELLING = "cancelling", "Cancelling"
        CANCELLED = "cancelled", "Cancelled"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    class Policy(models.TextChoices):
        ALLOW = "allow", "Allow (approve once)"
        DENY = "deny", "Deny"

    task_set = models.ForeignKey(TaskSet, on_delete=models.CASCADE, related_name="runs")
    # [{"id", "name", "provider"}] in the order chosen; names kept so a deleted profile still reads.
    profiles = StorableJSONField(default=list)
    split = StorableCharField(max_length=4, default="all")
    task_limit = models.PositiveIntegerField(null=True, blank=True)
    permission_policy = StorableCharField(max_length=5, choices=Policy.choices, default=Policy.ALLOW)
    concurrency = models.PositiveSmallIntegerField(default=2)
    status = StorableCharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    error = StorableTextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"Task run {self.pk} · {self.task_set} ({self.status})"

    @property
    def is_active(self) -> bool:
        return self.status in (self.Status.QUEUED, self.Status.RUNNING, self.Status.CANCELLING)


class TaskRunItem(models.Model):
    """One task under one profile: one conversation, and its measures once it ended."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        CANCELLED = "cancelled", "Cancelled"

    run = models.ForeignKey(TaskRun, on_delete=models.CASCADE, related_name="items")
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="+")
    profile = models.ForeignKey("registry.AgentProfile", null=True, on_delete=models.SET_NULL, related_name="+")
    profile_name = StorableCharField(max_length=100)
    position = models.PositiveIntegerField(default=0)
    conversation = models.OneToOneField("conversations.Conversation", null=True, blank=True, on_delete=models.SET_NULL,
                                        related_name="task_run_item")
    status = StorableCharField(max_length=10, choices=Status.choices, default=Status.PENDING, db_index=True)
    measures = StorableJSONField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run_id", "position", "id"]
        constraints = [models.UniqueConstraint(fields=["run", "task", "profile_name"], name="unique_task_per_profile_per_run")]
