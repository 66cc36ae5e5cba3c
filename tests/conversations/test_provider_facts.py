"""What is true of a model provider is said on its class (providers/base.py) and read from there: label,
vendor, OpenTelemetry name, whether its usage is an estimate, its default model, its own SDK's retry
settings; the automatic choice written once; a plain completion (MCP sampling) in each provider's shape."""
from __future__ import annotations

import pytest

from playground.conversations.providers import (
    automatic_provider_key,
    estimating_provider_keys,
    get_provider,
    otel_provider_name,
    provider_class,
    provider_estimates_usage,
    provider_is_offline,
    provider_key_for,
    vendor_provider_keys,
)
from playground.conversations.providers.anthropic_api import AnthropicProvider
from playground.conversations.providers.base import ModelProvider, ProviderError, chat_completions_request, messages_api_request
from playground.conversations.providers.openai_api import OpenAIProvider
from playground.conversations.testing.fake_api import FakeMessagesAPI, text_reply
from playground.conversations.testing.fake_openai import FakeOpenAIAPI, chat_reply
from playground.mcp_servers.server_requests import sampling_completion

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
# An MCP sampling request (CreateMessageRequest params) with every kind of block.
SAMPLING_PARAMS = {
    "systemPrompt": "You are terse.",
    "maxTokens": 100_000,
    "messages": [
        {"role": "user", "content": {"type": "text", "text": "What is in this picture?"}},
        {"role": "assistant", "content": [{"type": "text", "text": "Show me."}]},
        {"role": "user", "content": [{"type": "image", "mimeType": "image/png", "data": PNG}, {"type": "audio", "data": "x"}]},
    ],
}


@pytest.mark.parametrize(("key", "vendor", "otel", "estimates", "offline"), [
    ("anthropic", "anthropic", "anthropic", False, False),
    ("openai", "openai", "openai", False, False),
    ("demo", "anthropic", "playground.demo", True, True),
    ("demo-openai", "openai", "playground.demo", True, True),
])
def test_each_provider_class_states_its_facts(key, vendor, otel, estimates, offline):
    cls = provider_class(key)
    assert (cls.vendor, cls.otel_name, cls.estimates_usage, cls.offline) == (vendor, otel, estimates, offline)
    assert (otel_provider_name(key), provider_estimates_usage(key), provider_is_offline(key)) == (otel, estimates, offline)
    assert cls.label and cls.default_model()


def test_the_demo_agent_on_openais_wire_estimates_its_usage_and_traces_name_it_ours():
    # The regressions: a set naming only "demo" left demo-openai's task runs and traces "not estimated",
    # and its spans' gen_ai.provider.name was the raw key.
    assert estimating_provider_keys() == {"demo", "demo-openai"}
    assert otel_provider_name("demo-openai") == "playground.demo"
    assert otel_provider_name("gone-provider") == "gone-provider" and not provider_estimates_usage("gone-provider")


def test_default_models_are_each_vendors_own(settings):
    settings.DEFAULT_MODEL, settings.OPENAI_MODEL = "claude-x", "gpt-x"
    assert [provider_class(k).default_model() for k in ("anthropic", "demo", "openai", "demo-openai")] == [
        "claude-x", "claude-x", "gpt-x", "gpt-x"]


def test_the_openai_provider_reads_its_own_sdks_retry_settings(settings):
    settings.OPENAI_API_KEY, settings.ANTHROPIC_API_KEY = "sk-openai", "sk-anthropic"
    settings.ANTHROPIC_MAX_RETRIES, settings.ANTHROPIC_TIMEOUT_SECONDS = 7, 99.0
    settings.OPENAI_MAX_RETRIES, settings.OPENAI_TIMEOUT_SECONDS = 1, 12.0
    openai_provider = get_provider("openai")
    assert (openai_provider.client.max_retries, openai_provider.client.timeout) == (1, 12.0)
    assert (openai_provider.async_client.max_retries, openai_provider.async_client.timeout) == (1, 12.0)
    claude = get_provider("anthropic")
    assert (claude.client.max_retries, claude.client.timeout) == (7, 99.0)


def test_a_process_makes_each_sdk_client_once_per_set_of_options(settings):
    """A run gets its provider per message; the SDK clients (an SSL context each) are the process's."""
    settings.ANTHROPIC_API_KEY, settings.ANTHROPIC_BASE_URL = "sk-one", "http://127.0.0.1:9/"
    first, second = get_provider("anthropic"), get_provider("anthropic")
    assert first is not second
    assert first.client is second.client and first.async_client is second.async_client
    assert first.client is not first.async_client
    settings.ANTHROPIC_BASE_URL = "http://127.0.0.1:10/"  # other options (a test's double, a new key): another client
    other = get_provider("anthropic")
    assert other.async_client is not first.async_client and str(other.async_client.base_url) == "http://127.0.0.1:10/"


def test_the_automatic_choice_is_claude_with_a_key_else_the_demo_agent(settings):
    settings.ANTHROPIC_API_KEY = "sk-test"
    assert automatic_provider_key() == "anthropic" == provider_key_for("", None)
    settings.ANTHROPIC_API_KEY = ""
    assert automatic_provider_key() == "demo" == provider_key_for("", None)


# -- a plain completion, in each provider's own shape ----------------------------------------------------
def test_a_sampling_request_reads_as_a_completion_of_no_vendor():
    asked = sampling_completion(SAMPLING_PARAMS, max_tokens_cap=4096)
    assert (asked.system, asked.max_tokens) == ("You are terse.", 4096)
    assert asked.messages[2]["content"] == [{"type": "image", "media_type": "image/png", "data": PNG},
                                            {"type": "text", "text": "[audio content left out]"}]


def test_the_messages_api_body_is_the_one_sampling_sent_before():
    # Byte for byte what `sampling_as_messages_request` built before the neutral shape.
    asked = sampling_completion(SAMPLING_PARAMS, max_tokens_cap=4096)
    assert messages_api_request(asked.system, asked.messages, asked.max_tokens, "claude-sonnet-4-5") == {
        "model": "claude-sonnet-4-5", "max_tokens": 4096,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "What is in this picture?"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Show me."}]},
            {"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
                                         {"type": "text", "text": "[audio content left out]"}]},
        ],
        "system": "You are terse.",
    }


def test_claude_answers_a_completion_through_the_messages_api():
    asked = sampling_completion(SAMPLING_PARAMS, max_tokens_cap=4096)
    with FakeMessagesAPI() as api:
        api.script(text_reply("A red dot."))
        provider = AnthropicProvider(api_key="sk-test", base_url=api.url, max_retries=0, timeout=10)
        response = provider.complete(asked.system, asked.messages, asked.max_tokens, model="claude-sonnet-4-5")
        assert response.text() == "A red dot."
        assert api.message_requests[0].body == messages_api_request(asked.system, asked.messages, 4096, "claude-sonnet-4-5")


def test_openai_answers_a_completion_in_chat_completions_shape():
    # The regression: sampling sent a Messages API body (`system=`, Anthropic image blocks) to any provider.
    asked = sampling_completion(SAMPLING_PARAMS, max_tokens_cap=4096)
    with FakeOpenAIAPI() as api:
        api.script(chat_reply("A red dot."))
        provider = OpenAIProvider(api_key="sk-test", base_url=api.url, model="gpt-test", max_retries=0, timeout=10)
        response = provider.complete(asked.system, asked.messages, asked.max_tokens)
        assert response.text() == "A red dot."
        body = api.requests[0].body
    assert api.requests[0].path.endswith("/chat/completions") and api.requests[0].status == 200
    assert body == chat_completions_request(asked.system, asked.messages, 4096, "gpt-test")
    assert body["max_completion_tokens"] == 4096 and "system" not in body and "max_tokens" not in body
    assert body["messages"][0] == {"role": "system", "content": "You are terse."}
    assert body["messages"][2] == {"role": "assistant", "content": "Show me."}
    assert body["messages"][3]["content"][0] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}


@pytest.mark.parametrize("key", ["demo", "demo-openai"])
def test_the_demo_agent_answers_a_completion_on_either_wire(key, settings):
    settings.DEMO_STREAM_WORDS_PER_SECOND = 0
    response = get_provider(key).complete("", [{"role": "user", "content": [{"type": "text", "text": "Say hello"}]}], 200)
    assert response.text() and response.usage_source == "estimate" and not response.tool_uses()


def test_a_provider_that_cannot_complete_says_so():
    class Bare(ModelProvider):
        label = "bare provider"

        def create(self, request_kwargs):
            raise AssertionError("not called")

    with pytest.raises(ProviderError, match="bare provider cannot answer a plain completion") as raised:
        Bare().complete("", [], 10)
    assert raised.value.kind == "configuration"


def test_a_profile_on_openai_answers_a_sampling_request_in_chat_completions_shape(db, settings):
    from playground.conversations.sampling import answer_sampling_request
    from playground.mcp_servers.models import McpServer, McpServerRequest
    from playground.registry.models import AgentProfile

    server = McpServer.objects.create(name="asker", transport="stdio", command="true")
    row = McpServerRequest.objects.create(server=server, kind=McpServerRequest.Kind.SAMPLING, params=SAMPLING_PARAMS)
    profile = AgentProfile.objects.create(name="gpt", provider="openai")  # no model: the deployment's Claude default
    with FakeOpenAIAPI() as api:
        settings.OPENAI_API_KEY, settings.OPENAI_BASE_URL, settings.OPENAI_MODEL = "sk-test", api.url, "gpt-test"
        settings.OPENAI_MAX_RETRIES = 0
        api.script(chat_reply("A red dot.", model="gpt-test"))
        assert answer_sampling_request(row.pk, profile.pk) == "answered"
        body = api.requests[0].body
    # OpenAI's model where the profile names none of its own (as its conversations run), in OpenAI's shape.
    assert body == chat_completions_request("You are terse.", sampling_completion(SAMPLING_PARAMS, max_tokens_cap=4096).messages,
                                            settings.AGENT_MAX_TOKENS, "gpt-test")
    row.refresh_from_db()
    assert row.answered_with == "gpt-test (profile gpt)" and row.answer["content"]["text"] == "A red dot."


def test_every_pages_offline_label_follows_the_automatic_choice(settings, rf):
    from playground.context_processors import playground

    settings.ANTHROPIC_API_KEY = ""
    assert playground(rf.get("/"))["has_model_key"] is False
    settings.ANTHROPIC_API_KEY = "sk-test"
    assert playground(rf.get("/"))["has_model_key"] is True


def test_each_vendors_provider_and_its_offline_stand_in_are_read_from_the_classes(settings):
    # Compare runs a vendor's side with the vendor's provider, or without a key its offline demo agent.
    assert vendor_provider_keys("anthropic") == ("anthropic", "demo")
    assert vendor_provider_keys("openai") == ("openai", "demo-openai")
    settings.MODEL_PROVIDERS = {key: path for key, path in settings.MODEL_PROVIDERS.items() if key != "demo-openai"}
    assert vendor_provider_keys("openai") == ("openai", "")  # read from what is configured, not from a list
