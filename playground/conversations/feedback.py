"""Feedback on conversations and their turns: thumbs up or down and/or a comment, one per person and
target, given by people who may act in the playground (operators and up) on any conversation they watch.
The list filters by it, and "save selected as tasks" (agenteval) turns annotated conversations into a task set."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Exists, IntegerField, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from playground.access import OPERATOR, has_role
from playground.conversations.models import Conversation, Event, Feedback

MAX_COMMENT_CHARS = 2000
# The list's filter: value → (label, which feedback rows count).
FEEDBACK_FILTERS: dict[str, tuple[str, Q]] = {
    "any": ("any feedback", Q()),
    "good": ("✓ good", Q(rating=Feedback.Rating.GOOD)),
    "bad": ("✗ bad", Q(rating=Feedback.Rating.BAD)),
    "comment": ("with a comment", ~Q(comment="")),
}


class FeedbackError(ValueError):
    """Feedback that cannot be kept, with the reason a person reads."""


def can_give_feedback(user, conversation: Conversation) -> bool:
    return has_role(user, OPERATOR)


def turns_of(conversation: Conversation) -> list[tuple[int, int]]:
    """(turn_started sequence, turn number shown on the page) of the main agent's turns, in order."""
    starts = conversation.events.filter(type="turn_started", parent_sequence__isnull=True).order_by("sequence")
    return [(sequence, number) for number, sequence in enumerate(starts.values_list("sequence", flat=True), start=1)]


def give_feedback(conversation: Conversation, user, *, turn_sequence: int = Feedback.WHOLE_CONVERSATION,
                  rating: int | None = None, comment: str = "") -> Feedback:
    """Keep (or replace) `user`'s feedback on the conversation or one of its turns."""
    if not can_give_feedback(user, conversation):
        raise FeedbackError("Giving feedback needs the operator role.")
    comment = (comment or "").strip()
    if rating not in (None, Feedback.Rating.GOOD, Feedback.Rating.BAD):
        raise FeedbackError("The rating is good or bad.")
    if rating is None and not comment:
        raise FeedbackError("Give a rating, a comment or both.")
    if len(comment) > MAX_COMMENT_CHARS:
        raise FeedbackError(f"The comment is too long ({len(comment)} characters; at most {MAX_COMMENT_CHARS}).")
    if turn_sequence != Feedback.WHOLE_CONVERSATION and not Event.objects.filter(
            conversation=conversation, sequence=turn_sequence, type="turn_started").exists():
        raise FeedbackError("That turn is not part of this conversation.")
    feedback, _ = Feedback.objects.update_or_create(
        conversation=conversation, turn_sequence=turn_sequence, user=user, defaults={"rating": rating, "comment": comment})
    return feedback


def withdraw_feedback(conversation: Conversation, user, turn_sequence: int) -> bool:
    deleted, _ = Feedback.objects.filter(conversation=conversation, user=user, turn_sequence=turn_sequence).delete()
    return bool(deleted)


@dataclass(frozen=True)
class FeedbackRow:
    feedback: Feedback
    target: str  # "the conversation" or "turn N"
    mine: bool


def feedback_rows(conversation: Conversation, user, turns: list[tuple[int, int]] | None = None) -> list[FeedbackRow]:
    numbers = dict(turns if turns is not None else turns_of(conversation))
    rows = []
    for feedback in conversation.feedback.select_related("user"):
        target = ("the conversation" if feedback.turn_sequence == Feedback.WHOLE_CONVERSATION
                  else f"turn {numbers.get(feedback.turn_sequence, '?')}")
        rows.append(FeedbackRow(feedback=feedback, target=target, mine=feedback.user_id == getattr(user, "pk", None)))
    return rows


def feedback_context(conversation: Conversation, user) -> dict[str, Any]:
    """What the conversation page's feedback section shows: everyone's feedback, and a form if `user` may give it."""
    turns = turns_of(conversation)  # read once: the rows' targets and the form's choices
    rows = feedback_rows(conversation, user, turns)
    return {
        "conversation": conversation, "rows": rows, "can_give": can_give_feedback(user, conversation),
        "targets": [(Feedback.WHOLE_CONVERSATION, "The conversation"),
                    *[(sequence, f"Turn {number}") for sequence, number in turns]],
        "good": sum(1 for row in rows if row.feedback.rating == Feedback.Rating.GOOD),
        "bad": sum(1 for row in rows if row.feedback.rating == Feedback.Rating.BAD),
        "max_comment": MAX_COMMENT_CHARS,
    }


def filter_by_feedback(qs: QuerySet[Conversation], value: str) -> QuerySet[Conversation]:
    label_and_rows = FEEDBACK_FILTERS.get(value)
    if label_and_rows is None:
        return qs
    return qs.filter(Exists(Feedback.objects.filter(label_and_rows[1], conversation=OuterRef("pk"))))


def with_feedback_counts(qs: QuerySet[Conversation]) -> QuerySet[Conversation]:
    """Each row's ✓ and ✗ counts, as subqueries (an aggregate would group the list and drop its order)."""
    def count(rating: int):
        rows = (Feedback.objects.filter(conversation=OuterRef("pk"), rating=rating).order_by()
                .values("conversation").annotate(n=Count("pk")).values("n"))
        return Coalesce(Subquery(rows, output_field=IntegerField()), 0)

    return qs.annotate(feedback_good=count(Feedback.Rating.GOOD), feedback_bad=count(Feedback.Rating.BAD))
