from __future__ import annotations

import pytest

from tests.toolset_fixtures import write_toy_toolsets


@pytest.fixture
def toy_toolsets(tmp_path, monkeypatch):
    """A three-tool toolset with twelve labelled queries, as TOOLSETS_DIR."""
    monkeypatch.setenv("TOOLSETS_DIR", str(tmp_path))
    return write_toy_toolsets(tmp_path)
