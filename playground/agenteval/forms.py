from __future__ import annotations

from django import forms

from playground.agenteval.models import TaskRun, TaskSet
from playground.agenteval.selectors import loading_mode_profiles
from playground.agenteval.services import MAX_CONCURRENCY
from playground.evaluation.selectors import available_toolsets
from playground.registry.models import AgentProfile


class TaskRunForm(forms.Form):
    task_set = forms.ModelChoiceField(queryset=TaskSet.objects.order_by("name"), empty_label=None)
    profiles = forms.ModelMultipleChoiceField(queryset=AgentProfile.objects.filter(is_subagent=False).order_by("name"),
                                              widget=forms.CheckboxSelectMultiple, required=False,
                                              help_text="Each task runs once under every profile ticked.")
    every_mode = forms.BooleanField(
        required=False, label="Every loading mode",
        help_text="Add one profile per loading mode (tool search off, then each wire style's: Anthropic's, tool changes "
                  "with and without ToolSearch, OpenAI's) to the profiles ticked: every mode on the same tasks, in one "
                  "table and chart.")
    split = forms.ChoiceField(choices=[("all", "all"), ("test", "test"), ("dev", "dev")], initial="all")
    limit = forms.IntegerField(min_value=1, max_value=5000, required=False, initial=20, label="Tasks",
                               help_text="Evenly sampled tasks of the split; empty = all.")
    permission_policy = forms.ChoiceField(choices=TaskRun.Policy.choices, initial=TaskRun.Policy.ALLOW,
                                          label="Permission prompts", help_text="How an ask rule's prompt is answered: nobody waits.")
    concurrency = forms.IntegerField(min_value=1, max_value=MAX_CONCURRENCY, initial=2,
                                     help_text="Conversations of this run at once.")


    def clean(self):
        cleaned = super().clean()
        profiles = list(cleaned.get("profiles") or [])
        if cleaned.get("every_mode"):
            profiles += [p for p in loading_mode_profiles() if p not in profiles]
        if not profiles:
            self.add_error("profiles", "Tick at least one profile, or every loading mode.")
        cleaned["profiles"] = profiles
        return cleaned


class ToolsetTaskSetForm(forms.Form):
    toolset = forms.ChoiceField()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["toolset"].choices = [(t, t) for t in available_toolsets()]


class UploadTaskSetForm(forms.Form):
    name = forms.CharField(max_length=100)
    file = forms.FileField(help_text="JSONL: id, query, expected_tool_names, optional equivalent_names and category.")
    catalog = forms.ChoiceField(required=False, label="Labelled on",
                                help_text="The toolset whose catalog the tasks name; empty = this registry's own tools.")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["catalog"].choices = [("", "this registry")] + [(t, t) for t in available_toolsets()]
