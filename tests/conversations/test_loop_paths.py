"""Call-time permissions (deny, ask → once / always / timeout), cancel, subagents and compaction."""
from __future__ import annotations


import pytest

from playground.conversations import runs, services
from playground.conversations.models import Conversation, Event, Message
from playground.conversations.testing.fake_api import text_reply, tool_use_reply
from playground.engine.execution import ToolExecutor, ToolOutcome
from playground.registry.models import PermissionRule
from tests.conversations.conftest import converse, event_types, events_of, run_as_the_task

TIME = "mcp__time__get_current_time"


def last_result(fake_api, index=-1) -> dict:
    return fake_api.message_requests[index].body["messages"][-1]["content"][0]


def test_a_denied_tool_is_never_sent_and_a_call_to_it_is_refused(admin_user, tool_world, native_profile, fake_api, claude):
    PermissionRule.objects.create(effect="deny", pattern="echo")
    fake_api.script(tool_use_reply("echo", {"text": "hi"}), text_reply("ok"))
    conversation, outcome = converse(admin_user, "echo hi", profile=native_profile, provider=claude)
    assert "echo" not in [t["name"] for t in fake_api.message_requests[0].body["tools"]]
    result = last_result(fake_api)
    assert result["is_error"] is True and "denied by a permission rule" in result["content"][0]["text"]
    assert events_of(conversation, "tool_call")[0].payload["permission"] == "deny"
    assert events_of(conversation, "tool_result")[0].payload["refusal"] == "denied"  # the code the measures count by
    assert outcome.reason == "end_turn"


def resume(conversation, prompt, provider, executor=None):
    """What the task queued by the answer does, in-process."""
    outcome = run_as_the_task(conversation.pk, provider=provider, executor=executor, resume_prompt=prompt.sequence)
    conversation.refresh_from_db()
    return outcome


def test_a_prompt_pauses_the_run_and_saves_what_it_needs(admin_user, tool_world, native_profile, fake_api, claude):
    PermissionRule.objects.create(effect="ask", pattern="echo")
    fake_api.script(tool_use_reply("echo", {"text": "hi"}), text_reply("ok"))
    conversation, outcome = converse(admin_user, "echo hi", profile=native_profile, provider=claude)
    assert outcome.reason == "waiting"
    assert conversation.status == Conversation.Status.WAITING
    prompt = events_of(conversation, "permission_prompt")[0]
    assert conversation.paused_run["prompt_sequence"] == prompt.sequence
    assert conversation.paused_run["call"]["name"] == "echo" and conversation.paused_run["index"] == 0
    assert len(fake_api.message_requests) == 1  # nothing more happens until someone answers


def test_an_unanswered_prompt_times_out_as_a_denial(admin_user, tool_world, native_profile, fake_api, claude, settings):
    settings.PERMISSION_PROMPT_TIMEOUT_SECONDS = 0.3
    PermissionRule.objects.create(effect="ask", pattern="echo")
    fake_api.script(tool_use_reply("echo", {"text": "hi"}), text_reply("ok"))
    conversation, _ = converse(admin_user, "echo hi", profile=native_profile, provider=claude)
    prompt = events_of(conversation, "permission_prompt")[0]
    assert runs.expire_prompt(conversation.pk, prompt.sequence)  # what the scheduled task does
    assert resume(conversation, prompt, claude).reason == "end_turn"
    assert event_types(conversation)[event_types(conversation).index("tool_call"):][:4] == [
        "tool_call", "permission_prompt", "permission_answer", "tool_result"]
    assert events_of(conversation, "permission_answer")[0].payload["choice"] == "timeout"
    result = last_result(fake_api)
    assert result["is_error"] is True and "nobody answered within 0.3 seconds" in result["content"][0]["text"]
    assert conversation.status == Conversation.Status.IDLE and conversation.paused_run is None
    assert not runs.expire_prompt(conversation.pk, prompt.sequence)  # answered: the timeout does nothing


def test_approve_once_runs_the_call_and_always_stops_asking(admin_user, tool_world, native_profile, fake_api, claude):
    PermissionRule.objects.create(effect="ask", pattern="echo")
    fake_api.script(tool_use_reply("echo", {"text": "one"}), tool_use_reply("echo", {"text": "two"}),
                    tool_use_reply("echo", {"text": "three"}), text_reply("done"))
    conversation, outcome = converse(admin_user, "echo things", profile=native_profile, provider=claude)
    assert outcome.reason == "waiting" and conversation.status == Conversation.Status.WAITING
    prompt = events_of(conversation, "permission_prompt")[0]
    services.answer_permission(conversation, prompt.sequence, "once", user=admin_user)
    assert Conversation.objects.get(pk=conversation.pk).status == Conversation.Status.RUNNING
    assert resume(conversation, prompt, claude).reason == "waiting"
    second = events_of(conversation, "permission_prompt")[-1]
    assert second.sequence != prompt.sequence
    assert resume(conversation, prompt, claude).reason == "superseded"  # a duplicate delivery does nothing
    with pytest.raises(services.ConversationError, match="already been answered"):
        services.answer_permission(conversation, prompt.sequence, "deny", user=admin_user)
    services.answer_permission(conversation, second.sequence, "always", user=admin_user)
    assert resume(conversation, second, claude).reason == "end_turn"
    assert conversation.always_allowed == ["echo"]
    assert len(events_of(conversation, "permission_prompt")) == 2  # the third call did not ask
    texts = [r["content"][0]["text"] for r in (last_result(fake_api, i) for i in (1, 2, 3))]
    assert texts == ["one", "two", "three"]


def test_a_deny_added_while_the_prompt_waited_wins_over_the_approval(admin_user, tool_world, native_profile, fake_api,
                                                                      claude):
    PermissionRule.objects.create(effect="ask", pattern="echo")
    fake_api.script(tool_use_reply("echo", {"text": "hi"}), text_reply("ok"))
    conversation, outcome = converse(admin_user, "echo hi", profile=native_profile, provider=claude)
    assert outcome.reason == "waiting"
    prompt = events_of(conversation, "permission_prompt")[0]
    PermissionRule.objects.create(effect="deny", pattern="echo")  # an editor, while the person reads the prompt
    services.answer_permission(conversation, prompt.sequence, "once", user=admin_user)
    assert resume(conversation, prompt, claude).reason == "end_turn"
    result = last_result(fake_api)
    assert result["is_error"] is True and "denied by a permission rule" in result["content"][0]["text"]


class CancellingExecutor(ToolExecutor):
    """Runs like a tool that takes a while, during which the person presses cancel."""

    def __init__(self, conversation):
        self.conversation = conversation
        self.calls = 0

    def execute(self, tool, arguments, *, timeout=30.0, cancel=None):
        self.calls += 1
        services.request_cancel(self.conversation)
        return ToolOutcome(content=[{"type": "text", "text": "partial"}])


def test_cancel_stops_at_the_next_step_and_keeps_the_history_valid(admin_user, tool_world, native_profile, fake_api, claude):
    fake_api.script(
        message := None or tool_use_reply("echo", {"text": "a"}),
        text_reply("after cancel"),
    )
    # Two tool calls in one response: the first runs, the second is cancelled before it starts.
    message["content"].append({"type": "tool_use", "id": "toolu_second", "name": "echo", "input": {"text": "b"}})
    conversation = services.start_conversation(admin_user, profile=native_profile)
    executor = CancellingExecutor(conversation)
    conversation, outcome = converse(admin_user, "echo", conversation=conversation, provider=claude, executor=executor)
    assert outcome.reason == "cancelled" and executor.calls == 1
    assert conversation.status == Conversation.Status.CANCELLED
    assert events_of(conversation, "cancelled")[0].payload["stage"] == "between_steps"
    stored = Message.objects.filter(conversation=conversation).order_by("position").last().content
    assert [b["tool_use_id"] for b in stored] == [message["content"][0]["id"], "toolu_second"]
    assert stored[1]["is_error"] is True
    # The next message goes through: the fake API would reject a tool_use left without its result.
    conversation, outcome = converse(admin_user, "again", conversation=conversation, provider=claude)
    assert outcome.reason == "end_turn" and fake_api.message_requests[-1].status == 200


def test_the_agent_tool_runs_a_subagent_whose_events_nest_under_the_call(admin_user, tool_world, native_profile, fake_api, claude):
    fake_api.script(
        tool_use_reply("Agent", {"description": "find time", "prompt": "What time is it in Tokyo?"}),
        tool_use_reply("ToolSearch", {"query": f"select:{TIME}"}),
        tool_use_reply(TIME, {"timezone": "Asia/Tokyo"}),
        text_reply("Tokyo: noon."),
        text_reply("The subagent says: noon."),
    )
    conversation, outcome = converse(admin_user, "Ask a helper for the time in Tokyo", profile=native_profile, provider=claude)
    assert outcome.reason == "end_turn"
    parent_tools = [t["name"] for t in fake_api.message_requests[0].body["tools"]]
    sub_tools = [t["name"] for t in fake_api.message_requests[1].body["tools"]]
    assert "Agent" in parent_tools and "Agent" not in sub_tools  # the denylist keeps agents from nesting
    assert fake_api.message_requests[1].body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "What time is it in Tokyo?"}]}]
    call = next(e for e in events_of(conversation, "tool_call") if e.payload["name"] == "Agent")
    nested = Event.objects.filter(conversation=conversation, parent_sequence=call.sequence)
    assert {"turn_started", "toolsearch_query", "tool_call", "tool_result"} <= set(nested.values_list("type", flat=True))
    agent_result = next(e for e in events_of(conversation, "tool_result") if e.payload["name"] == "Agent")
    assert agent_result.payload["content"] == [{"type": "text", "text": "Tokyo: noon."}]
    assert last_result(fake_api)["content"] == [{"type": "text", "text": "Tokyo: noon."}]


def test_a_subagents_prompt_pauses_the_whole_run_and_the_subagent_goes_on_after_the_answer(
        admin_user, tool_world, native_profile, fake_api, claude):
    PermissionRule.objects.create(effect="ask", pattern="echo")
    fake_api.script(
        tool_use_reply("Agent", {"description": "echo", "prompt": "echo hi"}),
        tool_use_reply("echo", {"text": "hi"}),  # the subagent's call: it asks
        tool_use_reply("echo", {"text": "again"}),  # and asks again on resumption
        text_reply("echoed twice"),
        text_reply("done"),
    )
    conversation, outcome = converse(admin_user, "ask a helper to echo", profile=native_profile, provider=claude)
    assert outcome.reason == "waiting" and conversation.status == Conversation.Status.WAITING
    call = next(e for e in events_of(conversation, "tool_call") if e.payload["name"] == "Agent")
    prompt = events_of(conversation, "permission_prompt")[0]
    assert prompt.parent_sequence == call.sequence  # shown nested under the Agent call
    state = conversation.paused_run
    assert "call" not in state and state["child"]["call"]["name"] == "echo"  # the call waits in the subagent
    assert state["child"]["messages"][0] == {"role": "user", "content": [{"type": "text", "text": "echo hi"}]}

    services.answer_permission(conversation, prompt.sequence, "once", user=admin_user)
    assert resume(conversation, prompt, claude).reason == "waiting"  # the subagent's second call asks again
    second = events_of(conversation, "permission_prompt")[-1]
    assert second.parent_sequence == call.sequence and second.sequence != prompt.sequence
    services.answer_permission(conversation, second.sequence, "deny", user=admin_user)
    assert resume(conversation, second, claude).reason == "end_turn"
    assert conversation.status == Conversation.Status.IDLE and conversation.paused_run is None
    # The subagent's history went on where it stopped: its third request carries both results.
    sub_messages = fake_api.message_requests[3].body["messages"]
    assert sub_messages[0]["content"][0]["text"] == "echo hi"
    assert sub_messages[2]["content"][0]["content"][0]["text"] == "hi"
    assert "denied permission" in sub_messages[4]["content"][0]["content"][0]["text"]
    agent_result = next(e for e in events_of(conversation, "tool_result") if e.payload["name"] == "Agent")
    assert agent_result.payload["content"] == [{"type": "text", "text": "echoed twice"}]
    assert last_result(fake_api)["content"] == [{"type": "text", "text": "echoed twice"}]


def test_cancelling_a_paused_subagent_answers_the_agent_call(admin_user, tool_world, native_profile, fake_api, claude):
    PermissionRule.objects.create(effect="ask", pattern="echo")
    fake_api.script(tool_use_reply("Agent", {"description": "echo", "prompt": "echo hi"}), tool_use_reply("echo", {"text": "hi"}),
                    text_reply("next answer"))
    conversation, _ = converse(admin_user, "ask a helper to echo", profile=native_profile, provider=claude)
    assert services.request_cancel(conversation, user=admin_user)
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.CANCELLED
    last = Message.objects.filter(conversation=conversation).order_by("-position").first()
    # The Agent call had started (its subagent waited on the prompt): not "before this call ran".
    assert last.content[0]["is_error"]
    assert last.content[0]["content"][0]["text"] == runs.CANCELLED_WAITING_SUBAGENT
    conversation, outcome = converse(admin_user, "again", conversation=conversation, provider=claude)
    assert outcome.reason == "end_turn"


def test_cancel_while_a_subagent_runs_says_the_agent_call_was_interrupted_and_the_next_call_never_ran(
        admin_user, tool_world, native_profile, fake_api, claude):
    agent = tool_use_reply("Agent", {"description": "echo", "prompt": "echo a"})
    agent["content"].append({"type": "tool_use", "id": "toolu_after", "name": "echo", "input": {"text": "b"}})
    fake_api.script(agent, tool_use_reply("echo", {"text": "a"}), text_reply("next answer"))
    conversation = services.start_conversation(admin_user, profile=native_profile)
    executor = CancellingExecutor(conversation)  # the subagent's echo runs, and the person cancels meanwhile
    conversation, outcome = converse(admin_user, "ask a helper", conversation=conversation, provider=claude, executor=executor)
    assert outcome.reason == "cancelled" and executor.calls == 1
    assert conversation.status == Conversation.Status.CANCELLED
    agent_id = agent["content"][0]["id"]
    stored = Message.objects.filter(conversation=conversation).order_by("position").last().content
    texts = {b["tool_use_id"]: b["content"][0]["text"] for b in stored}
    assert list(texts) == [agent_id, "toolu_after"]
    assert texts[agent_id].startswith("Cancelled by the person while it ran (after ")
    assert texts["toolu_after"] == runs.CANCELLED_CALL  # the call after it never started
    # The timeline's record of the Agent call says the same, and the cancelled event names it.
    agent_result = next(e for e in events_of(conversation, "tool_result") if e.payload["name"] == "Agent")
    assert agent_result.payload["is_error"] and agent_result.payload["error"] == "cancelled while it ran"
    assert agent_result.payload["refusal"] == "cancelled"
    assert agent_result.payload["content"][0]["text"] == texts[agent_id]
    cancelled = events_of(conversation, "cancelled")[0].payload
    assert cancelled["stage"] == "tool_call" and cancelled["interrupted"] == "Agent" and cancelled["after_ms"] >= 0
    conversation, outcome = converse(admin_user, "again", conversation=conversation, provider=claude)
    assert outcome.reason == "end_turn" and fake_api.message_requests[-1].status == 200


def test_compaction_summarises_older_messages_and_carries_discovered_tools(admin_user, tool_world, native_profile, fake_api,
                                                                           claude, settings):
    fake_api.script(tool_use_reply("ToolSearch", {"query": f"select:{TIME}"}), text_reply("Loaded the time tool."))
    conversation, _ = converse(admin_user, "load the time tool", profile=native_profile, provider=claude)
    settings.COMPACTION_THRESHOLD = 0.0001  # 20 tokens of a 200k window: the next turn compacts
    fake_api.script(text_reply("Summary: the person loaded the time tool."), tool_use_reply(TIME, {"timezone": "UTC"}),
                    text_reply("It is noon UTC."))
    conversation, outcome = converse(admin_user, "now call it", conversation=conversation, provider=claude)

    assert outcome.reason == "end_turn"
    compaction = events_of(conversation, "compaction")[0].payload
    assert compaction["carried_tools"] == [TIME] and compaction["compacted_messages"] == 4
    assert conversation.compaction["discovered_tools"] == [TIME]
    assert Message.objects.filter(conversation=conversation, compacted=True).count() == 4
    after = fake_api.message_requests[-2]  # the first request after compaction
    assert after.status == 200
    assert TIME in [t["name"] for t in after.body["tools"]]  # carried across the boundary
    assert "<conversation-summary>" in after.body["messages"][0]["content"][0]["text"]
    assert events_of(conversation, "tool_result")[-1].payload["is_error"] is False


def test_a_named_subagent_profile_gets_its_own_narrowed_tools(admin_user, tool_world, native_profile, fake_api, claude):
    from tests.conversations.conftest import make_profile

    make_profile("researcher", is_subagent=True, disallowed_tools=["calculator", "ToolSearch"])
    fake_api.script(
        tool_use_reply("Agent", {"prompt": "Look around", "subagent_type": "researcher"}),
        text_reply("Nothing to report."),
        text_reply("The researcher found nothing."),
    )
    conversation, outcome = converse(admin_user, "research", profile=native_profile, provider=claude)
    assert outcome.reason == "end_turn"
    sub_tools = [t["name"] for t in fake_api.message_requests[1].body["tools"]]
    assert "calculator" not in sub_tools and "Agent" not in sub_tools and "echo" in sub_tools
    # ToolSearch disallowed: the engine turns search off, so the subagent gets its deferred tools in full.
    assert "ToolSearch" not in sub_tools and TIME in sub_tools
    sub_turn = Event.objects.filter(conversation=conversation, type="turn_started", parent_sequence__isnull=False).first()
    assert sub_turn.payload["subagent"] == "researcher"


def test_tool_search_called_while_search_is_off_is_refused(admin_user, tool_world, off_profile, fake_api, claude):
    fake_api.script(tool_use_reply("ToolSearch", {"query": "time"}), text_reply("ok"))
    conversation, outcome = converse(admin_user, "time?", profile=off_profile, provider=claude)
    result = last_result(fake_api)
    assert result["is_error"] is True and "ToolSearch" in result["content"][0]["text"]
    assert not events_of(conversation, "toolsearch_query")


def test_cancelling_while_a_prompt_waits_closes_the_prompt(admin_user, tool_world, native_profile, fake_api, claude):
    PermissionRule.objects.create(effect="ask", pattern="echo")
    fake_api.script(tool_use_reply("echo", {"text": "one"}), text_reply("after"))
    conversation, outcome = converse(admin_user, "echo", profile=native_profile, provider=claude)
    assert outcome.reason == "waiting"
    prompt = events_of(conversation, "permission_prompt")[0]
    assert services.request_cancel(conversation, user=admin_user)  # no worker holds the run: it ends now
    answer = events_of(conversation, "permission_answer")[0].payload
    assert answer["prompt_sequence"] == prompt.sequence and answer["choice"] == "cancelled"
    assert events_of(conversation, "turn_finished")[-1].payload["reason"] == "cancelled"
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.CANCELLED and conversation.paused_run is None and not conversation.run_token
    with pytest.raises(services.ConversationError, match="already been answered"):
        services.answer_permission(conversation, prompt.sequence, "once", user=admin_user)
    assert not runs.expire_prompt(conversation.pk, prompt.sequence)
    # The history stays valid: the call got a result, so the next message runs.
    last = Message.objects.filter(conversation=conversation).order_by("-position").first()
    assert last.role == "user" and last.content[0]["is_error"] and "Cancelled" in last.content[0]["content"][0]["text"]
    conversation, outcome = converse(admin_user, "again", conversation=conversation, provider=claude)
    assert outcome.reason == "end_turn"


def test_a_cancel_queued_before_the_resumption_ends_the_run_with_a_valid_history(admin_user, tool_world, native_profile,
                                                                                 fake_api, claude):
    PermissionRule.objects.create(effect="ask", pattern="echo")
    fake_api.script(tool_use_reply("echo", {"text": "one"}), text_reply("after"))
    conversation, _ = converse(admin_user, "echo", profile=native_profile, provider=claude)
    prompt = events_of(conversation, "permission_prompt")[0]
    services.answer_permission(conversation, prompt.sequence, "once", user=admin_user)  # running, resumption queued
    token = Conversation.objects.get(pk=conversation.pk).run_token
    assert services.request_cancel(conversation, user=admin_user)  # no worker holds it yet: ended at once
    from playground.conversations.tasks import resume_conversation_task

    assert resume_conversation_task(conversation.pk, token, prompt.sequence) == "superseded"  # the late resumption
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.CANCELLED and conversation.paused_run is None
    last = Message.objects.filter(conversation=conversation).order_by("-position").first()
    assert last.role == "user" and last.content[0]["type"] == "tool_result" and last.content[0]["is_error"]


def test_a_profile_with_a_tuned_backend_searches_with_it(admin_user, tool_world):
    from playground.conversations.providers.demo import DemoAgentProvider
    from tests.conversations.conftest import make_profile

    profile = make_profile("tuned", search_backend="bm25:k1=1.5:server_weight=0")
    conversation, outcome = converse(admin_user, "What time is it in Tokyo?", profile=profile, provider=DemoAgentProvider())
    search = events_of(conversation, "toolsearch_query")[0].payload
    assert search["backend"] == "bm25:k1=1.5:server_weight=0" and TIME in search["loaded"], search
    assert outcome.reason == "end_turn"


def test_a_cancel_frees_an_answered_run_no_worker_resumed_at_once(admin_user, tool_world, native_profile, fake_api, claude):
    PermissionRule.objects.create(effect="ask", pattern="echo")
    fake_api.script(tool_use_reply("echo", {"text": "one"}), text_reply("after"))
    conversation, _ = converse(admin_user, "echo", profile=native_profile, provider=claude)
    prompt = events_of(conversation, "permission_prompt")[0]
    services.answer_permission(conversation, prompt.sequence, "once", user=admin_user)  # its resumption is lost
    assert services.request_cancel(conversation, user=admin_user)  # no worker holds it: one cancel is enough
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.CANCELLED and conversation.paused_run is None
    conversation, outcome = converse(admin_user, "again", conversation=conversation, provider=claude)
    assert outcome.reason == "end_turn"  # the history is valid: the call got its result
