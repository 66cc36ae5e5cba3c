from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models
from playground.storage_fields import StorableCharField, StorableJSONField, StorableTextField


class Conversation(models.Model):
    class Status(models.TextChoices):
        IDLE = "idle", "Idle"
        RUNNING = "running", "Running"
        WAITING = "waiting", "Waiting for permission"
        CANCELLING = "cancelling", "Cancelling"
        CANCELLED = "cancelled", "Cancelled"  # the last run was cancelled; takes messages like idle
        FAILED = "failed", "Failed"

    class Kind(models.TextChoices):
        """Where a conversation came from: the usage overview splits and filters by it."""

        INTERACTIVE = "interactive", "Interactive"
        COMPARE = "compare", "Compare"
        TASK_RUN = "task_run", "Task run"
        REPLAY = "replay", "Replay"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations")
    profile = models.ForeignKey("registry.AgentProfile", null=True, on_delete=models.SET_NULL)
    kind = StorableCharField(max_length=12, choices=Kind.choices, default=Kind.INTERACTIVE)
    # The profile's settings copied at start, so later edits do not rewrite history.
    profile_snapshot = StorableJSONField(default=dict)
    title = StorableCharField(max_length=200, blank=True)
    status = StorableCharField(max_length=10, choices=Status.choices, default=Status.IDLE)
    # A compare view runs two conversations side by side on the same message.
    compare_group = StorableCharField(max_length=36, blank=True, db_index=True)
    # Compaction boundary: discovered tools carried over, summary of what was compacted.
    compaction = StorableJSONField(null=True, blank=True)
    next_sequence = models.PositiveIntegerField(default=1)
    # Model provider key in settings.MODEL_PROVIDERS; empty = automatic (API key → Anthropic, else demo).
    provider = StorableCharField(max_length=40, blank=True)
    # Tools the person approved "always" in this conversation (call-time `ask` no longer prompts).
    always_allowed = StorableJSONField(default=list, blank=True)
    # The lease of the run in progress (lease.py): which run owns the conversation, and when its
    # worker last said it is alive. A run whose heartbeat stops is released (runs.release_lost_run).
    run_token = StorableCharField(max_length=32, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # When the current run's task was handed to the broker (the person's request, or a re-send), and
    # how often it was re-sent: a run no worker claimed within a grace, whose task the broker no longer
    # holds (Redis restarted), is handed over again a few times, then failed (requeue.py).
    queued_at = models.DateTimeField(null=True, blank=True)
    queue_attempts = models.PositiveSmallIntegerField(default=0)
    # A run paused on a permission prompt holds no worker: what it needs to go on once the prompt is
    # answered (the prompt, the turn's tool calls and the results so far). Empty while nothing waits.
    paused_run = StorableJSONField(null=True, blank=True)
    # A replay (replays.py): the conversation whose person's messages this one re-sends under other
    # settings, and the plan — the messages, how many were sent, the origin's permission answers.
    replay_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="replays")
    replay_plan = StorableJSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.title or f"Conversation {self.pk}"


class Message(models.Model):
    """The exact content blocks exchanged with the model, in order."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages")
    position = models.PositiveIntegerField()
    role = StorableCharField(max_length=10)  # user / assistant
    content = StorableJSONField()  # list of content blocks
    compacted = models.BooleanField(default=False)  # replaced by a compaction summary
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["conversation_id", "position"]
        constraints = [models.UniqueConstraint(fields=["conversation", "position"], name="unique_message_position")]


class Event(models.Model):
    """One typed loop event; saved (with its sequence number) before it is broadcast."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="events")
    sequence = models.PositiveIntegerField()
    type = StorableCharField(max_length=40)
    payload = StorableJSONField(default=dict)
    parent_sequence = models.PositiveIntegerField(null=True, blank=True)  # subagent events nest under a call
    # The turn_started event this event belongs to (None for run-level events and turn starts).
    turn_sequence = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["conversation_id", "sequence"]
        constraints = [models.UniqueConstraint(fields=["conversation", "sequence"], name="unique_event_sequence")]
        # The overview and the cost figures read one kind of event over a period (overview.py).
        indexes = [models.Index(fields=["type", "created_at"], name="event_type_created")]


class ToolSearchUsage(models.Model):
    """One piece of evidence for learning from usage: a keyword ToolSearch query of this
    conversation returned `tool_name`, and the model then called it successfully. The search
    backends index these queries as the tool's "usage" field (engine/search/usage.py)."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="search_usage")
    query = StorableTextField()
    # sha1 of the query: the uniqueness key (a B-tree index cannot hold an arbitrarily long text).
    query_hash = StorableCharField(max_length=40)
    tool_name = StorableCharField(max_length=255, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["conversation", "tool_name", "query_hash"], name="unique_search_usage"),
        ]

    def __str__(self) -> str:
        return f"{self.query!r} → {self.tool_name}"


def share_link_nonce() -> str:
    return secrets.token_urlsafe(16)


class ShareLink(models.Model):
    """A read-only link to one conversation for an audience without accounts (sharing.py).

    The link carries a signed token naming this row and its random nonce (so a token for another row
    cannot be made even with the signing key); the row says until when it works and whether its
    owner revoked it, so a link can be cut off before it expires."""

    nonce = models.CharField(max_length=43, default=share_link_nonce, editable=False)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="share_links")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"share link {self.pk} of conversation {self.conversation_id}"


class UsageBudget(models.Model):
    """A limit on what one user's or one profile's conversations may spend per day or month (budgets.py).

    At the limit, new conversations and new messages are refused with a clear message and admins see an
    alert; a run already going is never cut."""

    class Metric(models.TextChoices):
        DOLLARS = "dollars", "Dollars"
        TOKENS = "tokens", "Tokens (input + output)"

    class Period(models.TextChoices):
        DAY = "day", "Per day"
        MONTH = "month", "Per month"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    profile = models.ForeignKey("registry.AgentProfile", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    metric = StorableCharField(max_length=8, choices=Metric.choices, default=Metric.DOLLARS)
    period = StorableCharField(max_length=6, choices=Period.choices, default=Period.DAY)
    limit = models.DecimalField(max_digits=14, decimal_places=4)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(condition=models.Q(user__isnull=False, profile__isnull=True)
                                   | models.Q(user__isnull=True, profile__isnull=False), name="budget_one_scope"),
            models.CheckConstraint(condition=models.Q(limit__gt=0), name="budget_positive_limit"),
        ]

    def __str__(self) -> str:
        return f"budget {self.pk}"


class Feedback(models.Model):
    """A person's verdict on a conversation or one of its turns: thumbs up or down and/or a comment
    (feedback.py). One per person and target: giving it again replaces it."""

    class Rating(models.IntegerChoices):
        GOOD = 1, "Good"
        BAD = -1, "Bad"

    WHOLE_CONVERSATION = 0  # turn_sequence of feedback on the conversation as a whole

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="feedback")
    # The turn_started event's sequence, or WHOLE_CONVERSATION (0, not NULL: the unique constraint holds on it).
    turn_sequence = models.PositiveIntegerField(default=WHOLE_CONVERSATION)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    rating = models.SmallIntegerField(choices=Rating.choices, null=True, blank=True)
    comment = StorableTextField(blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["turn_sequence", "id"]
        constraints = [models.UniqueConstraint(fields=["conversation", "turn_sequence", "user"], name="one_feedback_per_target")]

    def __str__(self) -> str:
        return f"feedback {self.pk} on conversation {self.conversation_id}"
