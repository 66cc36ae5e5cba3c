"""Every model change has its migration: several branches change models, and a change merged without
its migration would only show on a deployment's next `migrate`."""
from io import StringIO

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_no_model_change_lacks_a_migration():
    out = StringIO()
    try:
        call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)
    except SystemExit as exit_:  # --check exits 1 when a migration is missing
        pytest.fail(f"a model change has no migration (exit {exit_.code}):\n{out.getvalue()}")
