"""The create and edit pages' one flow, shared by tools and profiles."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import messages
from django.shortcuts import redirect, render


def form_page(request, form: forms.ModelForm, template: str, context: dict[str, Any], *, detail: str,
              saved: Callable[[Any], str], after_save: Callable[[], None] | None = None):
    """A valid POST saves the form, says `saved(row)` and goes to the row's `detail` page; otherwise
    the form again (400 when it has errors)."""
    if request.method == "POST" and form.is_valid():
        row = form.save()
        if after_save is not None:
            after_save()
        messages.success(request, saved(row))
        return redirect(detail, pk=row.pk)
    return render(request, template, {"form": form, **context}, status=400 if form.errors else 200)
