from __future__ import annotations

from playground.engine.execution import ToolOutcome


def test_an_outcome_joins_its_text_blocks_and_serialises():
    outcome = ToolOutcome(content=[{"type": "text", "text": "a"}, {"type": "image", "source": {}}, {"type": "text", "text": "b"}], duration_ms=1.23456)
    assert outcome.text() == "a\nb"
    assert outcome.to_dict()["duration_ms"] == 1.23 and outcome.to_dict()["is_error"] is False
