from __future__ import annotations

from django.urls import path

from playground.access import EDITOR, OPERATOR, VIEWER, allow
from playground.agenteval import views

app_name = "agenteval"
# Who may use each route (see playground/urls.py): viewers read runs and tasks, editors start runs and
# add task sets; a run is cancelled by the editor who started it or an admin (as a conversation is by
# its owner or an admin: another editor's run is not theirs to stop); anyone who may see a
# conversation may save it as a task.
access_rules = {
    "index": allow(get=VIEWER, post=EDITOR),
    "taskset_add": allow(post=EDITOR),
    "taskset_detail": allow(get=VIEWER),
    "taskset_import_catalog": allow(post=EDITOR),
    "save_conversation": allow(post=OPERATOR, owned=True),
    "save_conversations": allow(post=OPERATOR),
    "run_detail": allow(get=VIEWER),
    "run_cancel": allow(post=EDITOR, owned=True),
    "run_export": allow(get=VIEWER),
}
urlpatterns = [
    path("", views.index, name="index"),
    path("task-sets/", views.taskset_add, name="taskset_add"),
    path("task-sets/<int:pk>/", views.taskset_detail, name="taskset_detail"),
    path("task-sets/<int:pk>/import-catalog/", views.taskset_import_catalog, name="taskset_import_catalog"),
    path("save-conversation/<int:pk>/", views.save_conversation, name="save_conversation"),
    path("save-conversations/", views.save_conversations, name="save_conversations"),
    path("runs/<int:pk>/", views.run_detail, name="run_detail"),
    path("runs/<int:pk>/cancel/", views.run_cancel, name="run_cancel"),
    path("runs/<int:pk>/export/", views.run_export, name="run_export"),
]
