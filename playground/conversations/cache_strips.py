"""The cache strip: each request of a conversation through the engine's prompt cache model.

One `ConversationCache` per agent run and chain (the main agent, or one subagent call). It starts
from the chain's earlier requests (their stored bodies, at the times they were sent, read from the
strips saved with them), then accounts each new request as it is sent — so a page reloaded, a run
resumed after a permission prompt and a run for the next message all see the same cache. Beside it
the turn's all-tools baseline (`TurnPlan.all_tools_request`, cached whatever the profile does) goes
through a second model: the pages compare the conversation with a cached all-tools conversation,
not only with an uncached one. The rules (prefixes, breakpoints, TTL, prices) are the engine's
(`engine/prompt_cache.py`, `engine/pricing.py`); this module only feeds them.
"""
from __future__ import annotations

import time
from typing import Any

from playground.conversations import events as ev
from playground.conversations.models import Event
from playground.engine.pricing import PriceTable
from playground.engine.prompt_cache import CachingModel, TurnCache, reported_split
from playground.engine.tokens import CharEstimateCounter
from playground.engine.turn import TurnPlan

# The demo agent and the Messages API double count with the same estimate: their reported split and
# the model's agree exactly (a real API's tokenizer counts differently; the strip shows both).
_COUNTER = CharEstimateCounter()


class ConversationCache:
    """The prompt cache of one chain of requests (the main agent's, or one subagent call's)."""

    def __init__(self, conversation_id: int, parent_sequence: int | None, plan: TurnPlan, table: PriceTable) -> None:
        self.table = table
        self.model: CachingModel = plan.prompt_cache_model(_COUNTER)
        self.baseline: CachingModel = plan.prompt_cache_model(_COUNTER, cached=True)
        self.not_replayed = 0
        self.sent = 0
        self._replay(conversation_id, parent_sequence, plan)

    def _replay(self, conversation_id: int, parent_sequence: int | None, plan: TurnPlan) -> None:
        chain = Event.objects.filter(conversation_id=conversation_id, parent_sequence=parent_sequence)
        bodies = {turn: (payload or {}).get("body") or {} for turn, payload in
                  chain.filter(type="model_request").values_list("turn_sequence", "payload")}
        for turn, payload in chain.filter(type="cache_strip").order_by("sequence").values_list("turn_sequence", "payload"):
            body, at = bodies.get(turn) or {}, float(payload.get("sent_at") or 0)
            if not body or body.get("too_large"):
                self.not_replayed += 1
            else:
                self.model.send(body, at)
            count = int(payload.get("history_messages") or 0)
            if 0 < count <= len(plan.state.messages):  # the same history then (a compaction since breaks it anyway)
                self.baseline.send(plan.all_tools_request(plan.state.messages[:count]), at)
            self.sent += 1

    def account(self, plan: TurnPlan, request: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        """The split of `request`, sent now (`body`, the turn's `events.request_body(request)` as its
        model_request event stores it, made once per turn: a later run's replay keys it the same), and
        its all-tools baseline's; the strip's fields before the API answers."""
        at = time.time()
        split = self.model.send(request if body.get("too_large") else body, at)
        baseline = self.baseline.send(plan.all_tools_request(), at)
        model, ttl = plan.settings.model, plan.settings.prompt_cache_ttl
        first = self.sent == 0
        self.sent += 1
        return {
            "vendor": plan.cache_vendor, "enabled": plan.caches_prompt, "ttl": ttl, "model": model,
            **_split(split), "prefix_break": split.prefix_break.to_dict() if split.prefix_break else {},
            "first_request": first, **self._costs(split, model, ttl),
            "all_tools": {**_split(baseline), **self._costs(baseline, model, ttl)},
            "counter": _COUNTER.source, "not_replayed": self.not_replayed,
            "sent_at": at, "history_messages": len(plan.state.messages),
        }

    def _costs(self, split: TurnCache, model: str, ttl: str) -> dict[str, float | None]:
        return {
            "cost_usd": self.table.cost_usd(model, split.uncached_tokens, 0, split.cache_write_tokens,
                                            split.cache_read_tokens, ttl=ttl),
            "uncached_cost_usd": self.table.cost_usd(model, split.input_tokens, 0),
        }


def _split(turn: TurnCache) -> dict[str, int]:
    return {"input_tokens": turn.input_tokens, "cache_write_tokens": turn.cache_write_tokens,
            "cache_read_tokens": turn.cache_read_tokens, "uncached_tokens": turn.uncached_tokens}


def cache_strip(accounted: dict[str, Any], usage: dict[str, Any] | None, usage_source: str = "api") -> ev.CacheStrip:
    """The strip event: the model's split (`ConversationCache.account`) and the reported one, named by
    who reported it (an API, or the offline demo agent whose usage is the same model's estimate)."""
    return ev.CacheStrip(**accounted, reported=reported_split(accounted["vendor"], usage) or {},
                         reported_by="estimate" if usage_source == "estimate" else "api")
