"""A tiny deterministic stand-in for MiniLM: each word adds a fixed pseudo-random direction, rows
are unit length. Fast, no model package, and it records every text it encoded (what the index
tests count: "encoded nothing" means `texts` stayed empty)."""
from __future__ import annotations

import hashlib
import re

import numpy as np


class FakeEncoder:
    dim = 32
    model_id = "fake-encoder"
    runtime = "fake"

    def __init__(self) -> None:
        self.texts: list[str] = []

    def _word(self, word: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha1(word.encode()).digest()[:4], "little")
        return np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)

    def encode(self, texts, *, batch_size: int = 32, concurrent_runs: int = 1) -> np.ndarray:
        self.texts.extend(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"[a-z0-9]+", text.lower()):
                out[i] += self._word(word)
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)

    def encode_one(self, text: str) -> np.ndarray:
        return self.encode([text])[0]

    def encode_pooled(self, text: str, spans) -> np.ndarray:
        return self.encode([text] + [text[a:b] for a, b in spans])
