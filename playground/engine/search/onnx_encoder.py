"""MiniLM's network on ONNX Runtime: the same weights and arithmetic as the NumPy encoder, faster.

The graph is built here from the weights `MiniLMEncoder` loads (no exported model file, no torch):
embeddings → 6 × (self-attention, GELU feed-forward, post-LayerNorm), output = the last layer's
token states. ONNX Runtime's CPU kernels pre-pack the constant weight matrices and fuse
LayerNorm / GELU / attention, which NumPy cannot; on a one-token-row-at-a-time workload (a query of
~30 tokens streams every weight matrix once) that is what the time goes to.

`precision="int8"` quantizes the weight matrices to int8 per output channel (ONNX Runtime's dynamic
quantization: activations are quantized per call): ~2× faster again, weights a quarter the size.
Its vectors differ from the float model's (cosine ≈ 0.99), so the encoder caches them apart, and
the quantized model is saved for the next process (`quantized_model_path`).

Needs `onnxruntime` and `onnx` (the `semantic` extra); `MiniLMEncoder` falls back to NumPy without them.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from playground.engine.search import concurrency
from playground.engine.search.embedding_cache import default_cache_path
from playground.engine.search.model_weights import weights_digest

PRECISIONS = ("fp32", "int8")
# The int8 recipe's name in saved models' file names: bump it when build_graph or _quantize_int8 change.
QUANTIZATION = "per-channel-int8-reduce-range-1"
log = logging.getLogger(__name__)
# Texts are packed into rows of up to ROW_TOKENS tokens, one row per ONNX run. Measured here on
# tool documents and bench requests against 64–512 tokens and several rows per run: a run costs a
# fixed ~2 ms (the weights) plus its tokens; larger runs spill the activations out of the cache,
# and a wider row spends more on attention across texts that the bias then discards.
ROW_TOKENS = 128


def onnx_available() -> str | None:
    """None when ONNX Runtime can run the encoder, else why not. `onnx` (the graph builder) is only
    looked for, not imported: importing it takes ~0.7 s, and a process that reads a saved int8
    model never builds a graph."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError as exc:
        return f"onnxruntime/onnx not installed ({exc})"
    if importlib.util.find_spec("onnx") is None:
        return "onnxruntime/onnx not installed (no module named 'onnx')"
    return None


def build_graph(weights: dict[str, np.ndarray], *, layers: int, heads: int, dim: int, eps: float):
    """The ONNX model (opset 20) of a BERT encoder whose weights are in the form `MiniLMEncoder._load_weights` returns
    (dense matrices pre-transposed, each layer's query/key/value joined as `qkv`).

    Inputs: input_ids and position_ids (int64, rows × tokens) and attention_bias (float32,
    rows × 1 × tokens × tokens, added to the attention scores). A row may hold several texts
    one after another (`pack_rows`): positions restart at each text, and the bias (0 within a
    text, −10⁴ elsewhere: exp underflows to exactly 0 in float32) keeps each text attending to
    its own tokens only, as if it ran alone. Output: states (rows × tokens × dim). The encoder
    runs one row at a time; the graph keeps the rows axis so that it is the usual BERT shape."""
    from onnx import TensorProto, checker, helper, numpy_helper

    initializers: list = []
    nodes: list = []

    def const(name: str, value) -> str:
        initializers.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(kind: str, inputs: list[str], **attributes) -> str:
        output = f"n{len(nodes)}_{kind}"
        nodes.append(helper.make_node(kind, inputs, [output], **attributes))
        return output

    def dense(x: str, prefix: str) -> str:
        return op("Add", [op("MatMul", [x, const(prefix + ".weight", weights[prefix + ".weight"])]), const(prefix + ".bias", weights[prefix + ".bias"])])

    def layer_norm(x: str, prefix: str) -> str:
        scale, bias = const(prefix + ".weight", weights[prefix + ".weight"]), const(prefix + ".bias", weights[prefix + ".bias"])
        return op("LayerNormalization", [x, scale, bias], axis=-1, epsilon=eps)

    head_dim = dim // heads
    x = op("Gather", [const("embeddings.word_embeddings.weight", weights["embeddings.word_embeddings.weight"]), "input_ids"])
    x = op("Add", [x, op("Gather", [const("embeddings.position_embeddings.weight", weights["embeddings.position_embeddings.weight"]), "position_ids"])])
    x = op("Add", [x, const("token_type_0", weights["embeddings.token_type_embeddings.weight"][0])])
    x = layer_norm(x, "embeddings.LayerNorm")
    split_heads = const("split_heads", np.array([0, 0, heads, head_dim], np.int64))
    join_heads = const("join_heads", np.array([0, 0, dim], np.int64))
    scale = const("scale", np.array(1.0 / np.sqrt(head_dim), np.float32))
    for layer in range(layers):
        p = f"encoder.layer.{layer}."
        qkv = dense(x, p + "attention.self.qkv")
        q, k, v = (f"{p}{name}" for name in ("q", "k", "v"))
        nodes.append(helper.make_node("Split", [qkv, const(p + "qkv_sizes", np.array([dim] * 3, np.int64))], [q, k, v], axis=-1))
        qh = op("Transpose", [op("Reshape", [q, split_heads])], perm=[0, 2, 1, 3])
        kh = op("Transpose", [op("Reshape", [k, split_heads])], perm=[0, 2, 3, 1])
        vh = op("Transpose", [op("Reshape", [v, split_heads])], perm=[0, 2, 1, 3])
        probs = op("Softmax", [op("Add", [op("Mul", [op("MatMul", [qh, kh]), scale]), "attention_bias"])], axis=-1)
        context = op("Reshape", [op("Transpose", [op("MatMul", [probs, vh])], perm=[0, 2, 1, 3]), join_heads])
        x = layer_norm(op("Add", [dense(context, p + "attention.output.dense"), x]), p + "attention.output.LayerNorm")
        hidden = op("Gelu", [dense(x, p + "intermediate.dense")])  # exact (erf) GELU, as BERT's "gelu"
        x = layer_norm(op("Add", [dense(hidden, p + "output.dense"), x]), p + "output.LayerNorm")
    nodes[-1].output[0] = "states"
    graph = helper.make_graph(
        nodes,
        "minilm",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["rows", "tokens"]),
            helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["rows", "tokens"]),
            helper.make_tensor_value_info("attention_bias", TensorProto.FLOAT, ["rows", 1, "tokens", "tokens"]),
        ],
        [helper.make_tensor_value_info("states", TensorProto.FLOAT, ["rows", "tokens", dim])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 9  # what onnxruntime ≥ 1.17 reads
    checker.check_model(model)
    return model


def _quantize_int8(model) -> bytes:
    """Weight matrices to int8, per output channel (dynamic quantization: uint8 activations per
    call). `reduce_range` keeps weights within 7 bits: x86 CPUs without VNNI multiply uint8 × int8
    pairs into a saturating int16 sum (255 × 127 × 2 overflows it, 255 × 63 × 2 does not), so with
    it every x86 CPU computes the same exact integer products and the same vectors. Measured here
    (a VNNI CPU) against full 8-bit weights: the same recall, within a query or two per toolset."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    root = logging.getLogger()
    root.addFilter(_quiet_quantizer)
    try:
        with tempfile.TemporaryDirectory(prefix="toolsearch-onnx-") as folder:
            out = Path(folder) / "int8.onnx"
            quantize_dynamic(model, out, weight_type=QuantType.QInt8, per_channel=True, reduce_range=True)
            return out.read_bytes()
    finally:
        root.removeFilter(_quiet_quantizer)


def _quiet_quantizer(record: logging.LogRecord) -> bool:
    """The quantizer logs on the root logger itself: a "pre-processing" advice (shape inference
    adds nothing to this graph) and an INFO line per tensor, ~100 lines per start. A filter on the
    root logger sees only records logged on it directly, so while it quantizes, those below ERROR
    are dropped and nothing from any named logger is (changing the root's level was not
    thread-safe: two threads could leave it raised)."""
    return record.levelno >= logging.ERROR


def quantized_model_path(model_dir: Path) -> Path | None:
    """Where the int8 model of `model_dir`'s weights is kept between processes (None: the embedding
    cache is off). Named by everything that shapes the bytes: the weights' and config's content,
    the onnx and onnxruntime versions, and QUANTIZATION (bump it when the graph or recipe changes)."""
    import onnxruntime  # heavy optional dependency (the semantic extra): loaded only for the ONNX runtime

    cache = default_cache_path()
    if cache is None:
        return None
    digest = hashlib.sha1(weights_digest(model_dir).encode())
    digest.update((model_dir / "config.json").read_bytes())
    digest.update(f"{QUANTIZATION} onnx {importlib.metadata.version('onnx')} onnxruntime {onnxruntime.__version__}".encode())
    return cache.parent / "models" / f"minilm-int8-{digest.hexdigest()[:20]}.onnx"


class OnnxNetwork:
    """`token_states(batch)` as `MiniLMEncoder._token_states` computes it, on an ONNX Runtime session.

    `load_weights` is called only when the graph must be built: an int8 model saved by an earlier
    process (`saved_at`) is read instead — 23 MB in a fraction of a second, where loading, building
    and quantizing take ~2 s and a few hundred MB of transient memory per worker start."""

    def __init__(self, load_weights: Callable[[], dict[str, np.ndarray]], *, layers: int, heads: int, dim: int, eps: float,
                 threads: int, precision: str = "fp32", saved_at: Path | None = None):
        import onnxruntime

        if precision not in PRECISIONS:
            raise ValueError(f"precision {precision!r}: choose one of {', '.join(PRECISIONS)}")
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = max(1, threads)
        options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        # Idle worker threads must not spin on a shared machine (threads > 1 only).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.precision = precision
        self.dim = dim
        # int8 quantizes each MatMul's input with one scale per run (DynamicQuantizeLinear is per
        # tensor), so a text packed with others would get a vector that depends on them (cosine
        # ~0.993 to its vector alone) and the embedding cache would depend on encoding order.
        # int8 therefore runs one text per run, which measured no slower (its weights stream in a
        # quarter of the time); the float model's vectors do not depend on their run, and packing
        # saves it a fifth per request.
        self.pack_texts = precision != "int8"
        self.loaded_from: Path | None = None  # the saved int8 model, when it was read instead of built
        if saved_at is not None and saved_at.is_file():
            try:
                self.session = onnxruntime.InferenceSession(saved_at.read_bytes(), options, providers=["CPUExecutionProvider"])
                self.loaded_from = saved_at
                return
            except Exception as exc:  # noqa: BLE001 - a truncated or foreign file: build it again, and replace it
                log.warning("saved int8 encoder %s unreadable (%s): building it again", saved_at, exc)
        model = build_graph(load_weights(), layers=layers, heads=heads, dim=dim, eps=eps)
        serialized = _quantize_int8(model) if precision == "int8" else model.SerializeToString()
        del model
        self.session = onnxruntime.InferenceSession(serialized, options, providers=["CPUExecutionProvider"])
        if saved_at is not None:
            _save_atomically(saved_at, serialized)

    def token_states(self, batch: list[np.ndarray], concurrent_runs: int = 1) -> np.ndarray:
        """The last layer's state of every token, packed (tokens, dim) in `batch` order. Float:
        texts share rows (`pack_rows`), one row per ONNX run: every run streams all the weight
        matrices once (~2 ms of a short query's ~4 ms), so a request and its sentences and clauses
        go through in one run, not one each. int8: one text per run (`pack_texts`).

        `concurrent_runs` > 1: the runs of several rows go `concurrent_runs` at a time on threads
        (ONNX Runtime releases the GIL, and a session may run from several threads); each run is
        the same run as alone, so the states are the same bits. For a request's own texts (the
        request, its sentences and clauses: up to a dozen int8 runs, the tail of a long request's
        time), not for catalog builds, which keep one core."""
        lengths = [len(ids) for ids in batch]
        starts = np.concatenate([[0], np.cumsum(lengths)]).astype(int)
        out = np.empty((int(starts[-1]), self.dim), dtype=np.float32)
        rows = pack_rows(lengths) if self.pack_texts else [[i] for i in range(len(batch))]

        def run(row: list[int]) -> None:
            if len(row) == 1:  # int8's one text per run: the same inputs, without building them from parts
                length = lengths[row[0]]
                ids, positions, bias = batch[row[0]][None, :], _positions(length), _no_bias(length)
            else:
                ids = np.concatenate([batch[i] for i in row])[None, :]
                positions = np.concatenate([np.arange(lengths[i]) for i in row])[None, :]
                text_of = np.repeat(np.arange(len(row)), [lengths[i] for i in row])
                bias = np.where(text_of[:, None] == text_of[None, :], np.float32(0.0), np.float32(-1e4))[None, None]
            states = self.session.run(["states"], {"input_ids": ids, "position_ids": positions, "attention_bias": bias})[0][0]
            column = 0
            for i in row:
                out[starts[i] : starts[i + 1]] = states[column : column + lengths[i]]
                column += lengths[i]

        if concurrent_runs > 1 and len(rows) > 1:
            # Longest first, so that the last run to start is a short one.
            rows.sort(key=lambda row: -sum(lengths[i] for i in row))
        concurrency.run_all(run, rows, concurrent_runs)
        return out


def _positions(length: int) -> np.ndarray:
    """Position ids 0 … length − 1 of one text, as (1, length) int64."""
    return np.arange(length, dtype=np.int64)[None, :]


def _no_bias(length: int) -> np.ndarray:
    """The attention bias of a row holding one text: every token sees every token (all zeros)."""
    return np.zeros((1, 1, length, length), dtype=np.float32)


def _save_atomically(path: Path, data: bytes) -> None:
    """Write via a temporary file and a rename: a worker starting meanwhile reads the old file or
    the new one, never half of one. A read-only cache only costs the next start its 2 s."""
    part: Path | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=path.name, suffix=".part", delete=False) as handle:
            part = Path(handle.name)
            handle.write(data)
        part.chmod(0o644)  # as a plain write would leave it (the temporary file is private)
        os.replace(part, path)
    except OSError as exc:
        log.warning("cannot save the int8 encoder at %s (%s); the next process builds it again", path, exc)
        if part is not None:
            part.unlink(missing_ok=True)


def pack_rows(lengths: list[int]) -> list[list[int]]:
    """Indices of `lengths` packed into rows of at most ROW_TOKENS tokens (a longer text has a row
    of its own), first fit by decreasing length: few runs, and a row's attention (which grows with
    the square of its tokens) stays a small share of its cost."""
    rows: list[list[int]] = []
    room: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        slot = next((r for r, free in enumerate(room) if free >= lengths[i]), None)
        if slot is None:
            rows.append([i])
            room.append(max(ROW_TOKENS, lengths[i]) - lengths[i])
        else:
            rows[slot].append(i)
            room[slot] -= lengths[i]
    return rows
