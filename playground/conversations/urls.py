from __future__ import annotations

from django.urls import path

from playground.access import ADMIN, EDITOR, OPERATOR, PUBLIC, VIEWER, allow
from playground.conversations import replay_views, views

app_name = "conversations"
# Who may use each route (see playground/urls.py): every role watches every conversation (list,
# page, export, compare view), read-only; operators start their own; sending, answering and
# cancelling are the owner's or an admin's (`owned`: anyone else gets a 404).
access_rules = {
    "list": allow(get=VIEWER),
    "new": allow(get=OPERATOR, post=OPERATOR),
    "detail": allow(get=VIEWER),
    "export": allow(get=VIEWER),
    "send": allow(post=OPERATOR, owned=True),
    "answer": allow(post=OPERATOR, owned=True),
    "cancel": allow(post=OPERATOR, owned=True),
    "compare": allow(get=OPERATOR, post=OPERATOR),
    "compare_view": allow(get=VIEWER),
    "present": allow(get=VIEWER),
    # Share links: made and revoked by the owner or an admin; opened by anyone holding one (sharing.py).
    "share_create": allow(post=OPERATOR, owned=True),
    "share_revoke": allow(post=OPERATOR, owned=True),
    "shared": allow(get=PUBLIC),
    "shared_present": allow(get=PUBLIC),
    "compare_figures": allow(get=VIEWER),
    "overview": allow(get=VIEWER),
    "overview_csv": allow(get=VIEWER),
    # Budgets: every role reads them on the overview; admins set them (budgets.py).
    "budget_add": allow(post=ADMIN),
    "budget_delete": allow(post=ADMIN),
    # Feedback on any conversation one watches, by people who may act in the playground (feedback.py).
    "feedback": allow(post=OPERATOR),
    "feedback_withdraw": allow(post=OPERATOR),
    # Where search fails: read by every role (as the conversations it comes from); editors label.
    "search_misses": allow(get=VIEWER),
    "search_misses_label": allow(post=EDITOR),
    "labelled_set_export": allow(get=VIEWER),
    # Replay and fork: who may start a conversation may replay any they watch; every role sees a replay beside its origin.
    "replay": allow(get=OPERATOR, post=OPERATOR),
    "replay_view": allow(get=VIEWER),
    "replay_figures": allow(get=VIEWER),
}
urlpatterns: list = [
    path("", views.conversation_list, name="list"),
    path("new/", views.conversation_new, name="new"),
    path("<int:pk>/", views.conversation_detail, name="detail"),
    path("<int:pk>/export.json", views.conversation_export, name="export"),
    path("<int:pk>/send/", views.conversation_send, name="send"),
    path("<int:pk>/answer/", views.conversation_answer, name="answer"),
    path("<int:pk>/cancel/", views.conversation_cancel, name="cancel"),
    path("<int:pk>/present/", views.conversation_present, name="present"),
    path("<int:pk>/feedback/", views.feedback_give, name="feedback"),
    path("<int:pk>/feedback/withdraw/", views.feedback_withdraw, name="feedback_withdraw"),
    path("<int:pk>/share/", views.share_create, name="share_create"),
    path("<int:pk>/share/<int:link>/revoke/", views.share_revoke, name="share_revoke"),
    path("shared/<str:token>/", views.shared_conversation, name="shared"),
    path("shared/<str:token>/present/", views.shared_present, name="shared_present"),
    path("compare/", views.compare, name="compare"),
    path("compare/<str:group>/", views.compare_view, name="compare_view"),
    path("compare/<str:group>/figures/", views.compare_figures, name="compare_figures"),
    path("overview/", views.usage_overview, name="overview"),
    path("overview.csv", views.usage_overview_csv, name="overview_csv"),
    path("budgets/add/", views.budget_add, name="budget_add"),
    path("budgets/<int:pk>/delete/", views.budget_delete, name="budget_delete"),
    path("search-misses/", views.search_misses, name="search_misses"),
    path("search-misses/label/", views.search_misses_label, name="search_misses_label"),
    path("<int:pk>/replay/", replay_views.replay, name="replay"),
    path("<int:pk>/side-by-side/", replay_views.replay_view, name="replay_view"),
    path("<int:pk>/side-by-side/figures/", replay_views.replay_figures, name="replay_figures"),
    path("labelled-set/<int:profile_id>.jsonl", views.labelled_set_export, name="labelled_set_export"),
]
