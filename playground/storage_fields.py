"""Model fields that store any text a person or a peer sent, NUL characters included.

PostgreSQL refuses a NUL character in text and jsonb; JSON escapes it as `\\u0000`, so a JSON body,
a socket frame or a tool's answer carries one past every check of raw bytes (the NUL middleware,
forms). These fields replace it with the visible escape (`safe_json.without_nul`) in one place —
when a value is prepared for the database, for `save()`, `update()`, `bulk_create()` and lookups
alike — and put the stored form back on the instance when it is saved, so a page rendered from the
object just saved (a live frame) shows what a reload shows.

They are Django's own fields to migrations (`deconstruct`): the columns do not change.
"""
from __future__ import annotations

from django.db import models

from playground.engine.safe_json import without_nul


class _NulSafe:
    def get_prep_value(self, value):
        return super().get_prep_value(without_nul(value))

    def pre_save(self, model_instance, add):
        value = super().pre_save(model_instance, add)
        cleaned = without_nul(value)
        if cleaned is not value:
            setattr(model_instance, self.attname, cleaned)
        return cleaned

    def deconstruct(self):
        name, _path, args, kwargs = super().deconstruct()
        return name, self._django_path, args, kwargs


class StorableCharField(_NulSafe, models.CharField):
    _django_path = "django.db.models.CharField"


class StorableTextField(_NulSafe, models.TextField):
    _django_path = "django.db.models.TextField"


class StorableJSONField(_NulSafe, models.JSONField):
    _django_path = "django.db.models.JSONField"
