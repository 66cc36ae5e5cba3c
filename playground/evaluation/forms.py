from __future__ import annotations

from django import forms
from django.conf import settings

from playground.engine.catalog_io import DEMO_TOOLSET
from playground.engine.search import quality
from playground.evaluation.selectors import available_toolsets
from playground.registry import availability, backends, inspector_options, labelled_sets

MAX_VARIANTS = 6


class EvaluationForm(forms.Form):
    toolset = forms.ChoiceField()
    backends = forms.MultipleChoiceField(widget=forms.CheckboxSelectMultiple, required=False)
    variants = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2, "placeholder": "hybrid:aspect_weight=0\nbm25:k1=1.5"}), required=False,
        label="Backends with settings",
        help_text="One per line, as in the inspector: a backend, a colon and its settings. Each runs beside the ones ticked.",
    )
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
        self.fields["toolset"].choices = [(t, t) for t in available_toolsets()] + [
            (labelled_sets.toolset_name(profile), f"{profile.name}: its own labelled set ({count} labelled)")
            for profile, count in labelled_sets.profiles_with_sets()
        ]
        self.fields["toolset"].initial = DEMO_TOOLSET
        names = list(getattr(settings, "TOOLSEARCH_BACKENDS", {}))
        self.fields["backends"].choices = [(n, n) for n in names]
        self.fields["backends"].initial = [n for n in ("claude-code", "bm25", "hybrid") if n in names]
        # A backend that cannot run here (postgres without PostgreSQL) is shown disabled with the fix, and refused.
        self.unavailable = {n: availability.backend_unavailable(n) for n in names}
        availability.mark_unavailable(self.fields["backends"], self.unavailable, widget=availability.ReasonCheckboxes)

    def clean_backends(self) -> list[str]:
        backends = self.cleaned_data.get("backends") or []
        refused = [f"{n} {self.unavailable[n]}" for n in backends if self.unavailable.get(n)]
        if refused:
            raise forms.ValidationError("; ".join(refused) + ".")
        return backends

    def clean_variants(self) -> list[str]:
        """Each line a backend spec with settings, checked as the inspector checks them, and made once
        here so that a bad value is an error on the form, not a failed run."""
        specs: list[str] = []
        lines = [line.strip() for line in (self.cleaned_data.get("variants") or "").splitlines() if line.strip()]
        if len(lines) > MAX_VARIANTS:
            raise forms.ValidationError(f"At most {MAX_VARIANTS} backends with settings per run.")
        names = set(backends.backend_names())
        for line in lines:
            name, sep, settings_text = line.partition(":")
            if name.strip() not in names or not sep or not settings_text.strip():
                raise forms.ValidationError(f"“{line}”: write a backend ({', '.join(sorted(names))}), a colon and settings.")
            try:
                spec = inspector_options.checked_backend_spec(name.strip(), settings_text)
            except ValueError as exc:
                raise forms.ValidationError(f"“{line}”: {exc}") from exc
            if availability.backend_unavailable(spec):
                raise forms.ValidationError(f"“{line}”: {name.strip()} {availability.backend_unavailable(spec)}.")
            if spec not in specs:
                specs.append(spec)
        return specs

    def clean(self):
        data = super().clean()
        chosen = list(data.get("backends") or []) + [s for s in data.get("variants") or [] if s not in (data.get("backends") or [])]
        if not chosen and "backends" not in self.errors and "variants" not in self.errors:
            self.add_error("backends", "Tick a backend or write one with settings.")
        data["all_backends"] = chosen
        data["usage_from"] = data.get("usage_from") or "none"
        if data["usage_from"] == "dev" and data.get("split") != "test":
            self.add_error("usage_from", "Learned from usage is measured on the test split only: a dev query would find itself in the log.")
        return data
