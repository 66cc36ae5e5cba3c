"""Compare: a vendor and wire style per side (Claude vs OpenAI on one profile, OpenAI's hosted search
vs our backend), and the figures view that puts both sides in one accounting."""
from __future__ import annotations

import pytest
from django.urls import reverse

from playground.conversations.models import Conversation
from playground.conversations.providers import conversation_provider_key
from playground.conversations.selectors import accounting_figures
from playground.engine.pricing import PriceTable
from tests.conversations.conftest import events_of, make_profile, run_as_the_task

pytestmark = pytest.mark.django_db
TIME = "mcp__time__get_current_time"


@pytest.fixture(autouse=True)
def no_keys_no_queue(settings, monkeypatch):
    from playground.conversations import tasks

    settings.ANTHROPIC_API_KEY = settings.OPENAI_API_KEY = ""
    queued: list[int] = []
    monkeypatch.setattr(tasks.run_conversation_task, "delay", lambda pk, run_token="": queued.append(pk))
    return queued


def start(client, **fields) -> list[Conversation]:
    response = client.post(reverse("conversations:compare"), {"message": "What time is it in Tokyo?", **fields})
    assert response.status_code == 302, response.content.decode()[:2000]
    group = response["Location"].rstrip("/").rsplit("/", 1)[-1]
    return list(Conversation.objects.filter(compare_group=group).order_by("pk"))


def ran_sides(client, capture, *, wire_a: str, wire_b: str) -> list[Conversation]:
    """One "Tool search on" profile compared with itself on two wires, both sides run to the end."""
    profile = make_profile("Tool search on")
    with capture(execute=True):
        sides = start(client, profile_a=profile.pk, profile_b=profile.pk, wire_a=wire_a, wire_b=wire_b)
    for conversation in sides:
        assert run_as_the_task(conversation.pk).reason == "end_turn"
    return sides


def test_claude_vs_openai_on_one_profile_runs_each_side_on_its_vendors_wire(admin_client, tool_world,
                                                                           django_capture_on_commit_callbacks):
    profile = make_profile("Tool search on")
    with django_capture_on_commit_callbacks(execute=True):
        left, right = start(admin_client, profile_a=profile.pk, profile_b=profile.pk, wire_a="anthropic-native",
                            wire_b="openai-client")
    # No keys here: each vendor's side runs with the offline demo agent on that vendor's wire.
    assert [conversation_provider_key(c) for c in (left, right)] == ["demo", "demo-openai"]
    for conversation in (left, right):
        assert run_as_the_task(conversation.pk).reason == "end_turn"
    assert [events_of(c, "turn_started")[0].payload["wire"] for c in (left, right)] == ["native", "openai-client"]
    # One profile, one query: the same tools found whichever vendor asked.
    found = [events_of(c, "toolsearch_query")[0].payload["loaded"] for c in (left, right)]
    assert found[0] == found[1] and TIME in found[0]

    page = admin_client.get(reverse("conversations:compare_figures", args=[left.compare_group])).content.decode()
    assert "openai-client" in page and "native" in page and "the engine&#x27;s estimate" in page
    figures = [accounting_figures(c) for c in (left, right)]
    for side in figures:
        assert side["input_total"] > 0 and side["tool_tokens"]["cost"] > 0
        assert side["usage_source"].startswith("the engine's estimate")
    # The right side is priced as gpt-5.4 (the model its requests named), at the one table's prices.
    usage = figures[1]["usage"]
    assert figures[1]["cost_usd"] == pytest.approx(PriceTable().cost_usd(
        "gpt-5.4", usage["input"], usage["output"], usage["cache_write"], usage["cache_read"]), abs=1e-6)
    assert figures[0]["unpriced"] == [] and figures[1]["unpriced"] == []


def test_the_cost_difference_is_split_into_tokens_price_and_caching(admin_client, tool_world,
                                                                   django_capture_on_commit_callbacks):
    """Claude-native against OpenAI: the page said "68 % less" without saying how much of it is the
    models' prices or caching rather than tool search. The three parts add up to the difference."""
    from playground.conversations.selectors import cost_difference

    left, right = ran_sides(admin_client, django_capture_on_commit_callbacks, wire_a="anthropic-native", wire_b="openai-client")
    sides = [accounting_figures(c) for c in (left, right)]
    split = cost_difference(*sides)
    assert split["difference"] == pytest.approx(sides[0]["cost_usd"] - sides[1]["cost_usd"], abs=1e-5)
    assert split["tokens"] + split["price"] + split["caching"] == pytest.approx(split["difference"], abs=1e-9)
    assert split["price"] != 0  # a Claude model and an OpenAI one: their rates differ
    # Priced alike, the same calls would cost the same: no price part, no token part.
    same = cost_difference(sides[0], {**sides[0]})
    assert same["price"] == pytest.approx(0) and same["tokens"] == pytest.approx(0) and same["caching"] == pytest.approx(0)
    page = admin_client.get(reverse("conversations:compare_figures", args=[left.compare_group])).content.decode()
    assert 'data-testid="figures-cost-split"' in page and "from the models' prices" in page and "from caching" in page
    assert "tool tokens, summed over turns" in page and "every turn" not in page
    import re

    cells = [re.sub(r"<[^>]+>", " ", cell) for cell in re.findall(r'data-testid="figures-provider">(.*?)</td>', page)]
    # One badge a side, the label not said twice beside it.
    assert len(cells) == 2 and all(cell.count("offline demo agent") == 1 for cell in cells), cells
    assert "(OpenAI wire)" in cells[1]


def test_hosted_search_against_our_backend(admin_client, tool_world, django_capture_on_commit_callbacks):
    hosted, ours = ran_sides(admin_client, django_capture_on_commit_callbacks, wire_a="openai-hosted", wire_b="openai-client")
    assert hosted.profile_snapshot["wire_style"] == "server" and ours.profile_snapshot["wire_style"] == "native"
    hosted_search, our_search = (events_of(c, "toolsearch_query")[0].payload for c in (hosted, ours))
    assert hosted_search["server_side"] and hosted_search["simulated"] and not our_search["server_side"]
    assert TIME in hosted_search["loaded"] and TIME in our_search["loaded"]


def test_a_side_the_deployment_cannot_run_is_refused_with_the_reason(admin_client, tool_world):
    profile = make_profile("Tool search on")
    page = admin_client.get(reverse("conversations:compare")).content.decode()
    assert 'value="anthropic-server" disabled' in page  # no Anthropic key: the demo agent cannot play it
    response = admin_client.post(reverse("conversations:compare"), {
        "profile_a": profile.pk, "profile_b": profile.pk, "wire_a": "anthropic-server", "wire_b": "openai-hosted",
        "message": "time?"})
    assert response.status_code == 200 and "server wire style needs" in response.content.decode()
    assert not Conversation.objects.exists()


def test_the_profiles_own_wire_keeps_the_forms_provider(admin_client, tool_world, django_capture_on_commit_callbacks):
    profile = make_profile("client", wire_style="client")
    with django_capture_on_commit_callbacks(execute=True):
        left, right = start(admin_client, profile_a=profile.pk, profile_b=profile.pk, provider="demo", wire_b="openai-functions")
    assert left.provider == "demo" and left.profile_snapshot["wire_style"] == "client"
    assert right.provider == "demo-openai"  # an offline provider chosen: the OpenAI side is offline too


def test_figures_of_a_comparison_nobody_may_see_are_a_404(admin_client):
    assert admin_client.get(reverse("conversations:compare_figures", args=["no-such-group"])).status_code == 404


def test_native_search_vs_tool_changes_on_one_profile(admin_client, tool_world, django_capture_on_commit_callbacks):
    """Compare names the tool-changes style: the same profile searched by the model (native) and
    predicted by the harness (tool_addition), one model call fewer on the right."""
    native, changes = ran_sides(admin_client, django_capture_on_commit_callbacks, wire_a="anthropic-native",
                                wire_b="anthropic-tool-changes")
    assert [events_of(c, "turn_started")[0].payload["wire"] for c in (native, changes)] == ["native", "tool-changes"]
    assert not events_of(native, "toolsearch_query")[0].payload.get("predicted")
    assert events_of(changes, "toolsearch_query")[0].payload["predicted"]
    assert [events_of(c, "tool_call")[0].payload["name"] for c in (native, changes)] == [TIME, TIME]
    assert len(events_of(changes, "model_response")) == len(events_of(native, "model_response")) - 1
    page = admin_client.get(reverse("conversations:compare_figures", args=[native.compare_group])).content.decode()
    assert "tool-changes" in page
