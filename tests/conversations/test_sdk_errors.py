"""One translation of both vendor SDKs' errors into the loop's ProviderError (providers/base.py)."""
import anthropic
import httpx2 as httpx  # the HTTP client both SDKs build their errors on
import openai
import pytest

from playground.conversations.providers.base import ProviderError, sdk_errors

REQUEST = httpx.Request("POST", "http://127.0.0.1/v1/x")


def status_error(sdk, status: int, body: dict):
    return sdk.APIStatusError("failed", response=httpx.Response(status, request=REQUEST), body=body)


@pytest.mark.parametrize(("sdk", "body", "kind_of_error"), [
    (anthropic, {"type": "error", "error": {"type": "invalid_request_error", "message": "tools: bad"}}, "invalid_request_error"),
    (openai, {"type": "invalid_request_error", "message": "tools: bad"}, "invalid_request_error"),  # the SDK's inner object
])
def test_a_status_error_of_either_sdk_names_its_type_and_message(sdk, body, kind_of_error):
    with pytest.raises(ProviderError) as raised, sdk_errors(sdk):
        raise status_error(sdk, 400, body)
    assert raised.value.message == f"Model API error 400 ({kind_of_error}): tools: bad"
    assert (raised.value.kind, raised.value.status_code, raised.value.retryable) == ("invalid_request", 400, False)


@pytest.mark.parametrize("sdk", [anthropic, openai])
def test_rate_limits_and_lost_connections_are_retryable(sdk):
    with pytest.raises(ProviderError) as raised, sdk_errors(sdk):
        raise status_error(sdk, 429, {})
    assert (raised.value.kind, raised.value.retryable) == ("rate_limit", True)
    with pytest.raises(ProviderError) as raised, sdk_errors(sdk):
        raise sdk.APIConnectionError(request=REQUEST)
    assert (raised.value.kind, raised.value.retryable) == ("connection", True)
