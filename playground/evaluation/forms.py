from __future__ import annotations

from django import forms
from django.conf import settings

from playground.engine.search import quality
from playground.evaluation.selectors import available_toolsets


class EvaluationForm(forms.Form):
    toolset = forms.ChoiceField()
    backends = forms.MultipleChoiceField(widget=forms.CheckboxSelectMultiple)
    query_style = forms.ChoiceField(choices=[(s, s) for s in quality.STYLES], initial="natural")
    split = forms.ChoiceField(choices=[(s, s) for s in quality.SPLITS], initial="test")
    usage_from = forms.ChoiceField(
        choices=[("none", "no (zero-shot)"), ("dev", "yes: the dev split is the log of past searches")], initial="none",
        label="Learned from usage", required=False,
        help_text="BM25 and hybrid score the dev split's queries as each gold tool's usage field; test split only.",
    )
    query_limit = forms.IntegerField(
        min_value=1, max_value=10_000, required=False, initial=200,
        help_text="Evenly sampled queries of the split; empty = all (the big toolsets take minutes).",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["toolset"].choices = [(t, t) for t in available_toolsets()]
        names = list(getattr(settings, "TOOLSEARCH_BACKENDS", {}))
        self.fields["backends"].choices = [(n, n) for n in names]
        self.fields["backends"].initial = [n for n in ("claude-code", "bm25", "hybrid") if n in names]

    def clean(self):
        data = super().clean()
        data["usage_from"] = data.get("usage_from") or "none"
        if data["usage_from"] == "dev" and data.get("split") != "test":
            self.add_error("usage_from", "Learned from usage is measured on the test split only: a dev query would find itself in the log.")
        return data
