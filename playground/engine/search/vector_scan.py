"""The cosine scan of a large catalog: an int8 copy of the tool vectors, scanned by ONNX Runtime.

At 100,000 tools the float32 matrix is 150 MB, and a scan (one matrix-vector product per query
row: the request, then each of its sentences) is bound by memory bandwidth: 20–60 ms a row on the
2-core development machine, several times that when the machine is busy. An int8 copy (one scale
per tool, symmetric) is 38 MB, and ONNX Runtime's `DynamicQuantizeMatMul` (the kernel the int8
encoder already runs, VNNI where the CPU has it) scores every row of a request in one pass over
it. Its cosines are within ~0.003 of the float32 ones, so each row's `rescore` best tools are then
scored again exactly from the float32 matrix: the tools that can reach the top of a ranking get
their exact cosine, the others an approximation far below them. Below `MIN_TOOLS` tools the float32
scan is already cheap and is kept (every evaluation toolset ranks exactly as before).

The scanner is built in a background thread when an index is built or loaded (quantizing and
ONNX Runtime's weight pre-packing take a second or two at 100,000 tools): searches scan the float32
matrix until it is ready, so a fresh process's first search does not wait for it.
"""
from __future__ import annotations

import logging
import threading
from typing import Any

import numpy as np

from playground.engine.memory import return_freed_memory
from playground.engine.search import concurrency

logger = logging.getLogger(__name__)

MIN_TOOLS = 20_000
RESCORE = 2_000  # per query row, the best tools by the int8 scan that are scored again exactly


class QuantizedScan:
    """An int8 copy of a (n, dim) matrix of unit rows and ONNX Runtime sessions that score query
    rows against it, one session per part of the tools (PARTS): a request may scan the parts on two
    threads when the host has an idle core (concurrency.py), one after the other otherwise. Each
    tool's cosine is the same bits either way (the query rows are quantized per run, and every
    part's run gets the same rows; tested): the split costs a 0.2 ms copy, and no memory.

    Built so that it does not stall the searches that run meanwhile (it is built in a background
    thread of a serving process): the matrix is quantized in blocks of rows (NumPy releases the GIL
    for each, and no 150 MB temporaries are made), and the int8 matrix reaches ONNX Runtime as an
    external initializer, an OrtValue over the NumPy array, instead of inside the model's protobuf.
    Copying 38 MB into the protobuf, building the graph and serializing it held the GIL for seconds
    at 100,000 tools on a busy machine (a search arriving meanwhile waited 5 s); the model is now a
    few hundred bytes and the session is made in a tenth of the time."""

    BLOCK = 8192  # rows quantized at a time
    PARTS = 2

    def __init__(self, matrix: np.ndarray) -> None:
        n = matrix.shape[0]
        bounds = np.linspace(0, n, self.PARTS + 1).astype(int)
        # The arrays are ONNX Runtime's initializers without a copy: they live as long as this object.
        self._initializers: list[tuple[np.ndarray, np.ndarray]] = []
        self.sessions = []
        for start, end in zip(bounds[:-1], bounds[1:]):
            if end > start:
                quantized, scale = self._quantize(matrix[start:end])
                self._initializers.append((quantized, scale))
                self.sessions.append(self._session(quantized, scale))
        self.size = n

    def _quantize(self, matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(dim, n) int8 (transposed: the kernel's (K, N) weights) and one scale per row."""
        n, dim = matrix.shape
        scale = np.empty(n, dtype=np.float32)
        quantized = np.empty((dim, n), dtype=np.int8)
        for start in range(0, n, self.BLOCK):
            block = matrix[start : start + self.BLOCK]
            block_scale = np.abs(block).max(axis=1) / 127.0
            block_scale[block_scale == 0] = 1.0
            scale[start : start + self.BLOCK] = block_scale
            quantized[:, start : start + self.BLOCK] = np.round(block / block_scale[:, None]).T
        return quantized, scale

    @staticmethod
    def _session(quantized: np.ndarray, scale: np.ndarray) -> Any:
        import onnxruntime as ort
        from onnx import TensorProto, helper

        dim, n = quantized.shape
        node = helper.make_node("DynamicQuantizeMatMul", ["queries", "tools", "scales"], ["cosines"], domain="com.microsoft")
        graph = helper.make_graph(
            [node], "tool_scan",
            [helper.make_tensor_value_info("queries", TensorProto.FLOAT, ["rows", dim])],
            [helper.make_tensor_value_info("cosines", TensorProto.FLOAT, ["rows", n])],
            initializer=[_external("tools", TensorProto.INT8, (dim, n)), _external("scales", TensorProto.FLOAT, (n,))],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1  # as the encoder: a busy machine's other core stays free
        options.add_external_initializers(["tools", "scales"], [ort.OrtValue.ortvalue_from_numpy(quantized), ort.OrtValue.ortvalue_from_numpy(scale)])
        return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])

    def cosines(self, queries: np.ndarray, threads: int = 1) -> np.ndarray:
        """(rows, n) approximate cosines of each query row to every tool; `threads` > 1: the parts
        side by side."""
        feed = {"queries": np.ascontiguousarray(queries, dtype=np.float32)}
        parts = concurrency.run_all(lambda session: session.run(None, feed)[0], self.sessions, threads)
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)


def _external(name: str, data_type: int, dims: tuple[int, ...]) -> Any:
    """A model initializer whose data ONNX Runtime is given apart (`add_external_initializers`)."""
    from onnx import TensorProto

    tensor = TensorProto(name=name, data_type=data_type, dims=list(dims), data_location=TensorProto.EXTERNAL)
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", "in-memory"  # never read: the session options supply the data
    return tensor


class VectorScan:
    """Scores query rows against one index's matrix: float32 until the int8 scanner is ready
    (built in the background on `prepare`), then int8 with the top rescored exactly."""

    def __init__(self, matrix: np.ndarray, *, min_tools: int = MIN_TOOLS, rescore: int = RESCORE) -> None:
        self.matrix = matrix
        self.settings = {"min_tools": min_tools, "rescore": rescore}
        self.rescore = rescore
        self.wanted = matrix.shape[0] >= min_tools
        self._scanner: QuantizedScan | None = None
        self._ready = threading.Event()
        self._started = False
        self._lock = threading.Lock()
        if not self.wanted:
            self._ready.set()

    def prepare(self) -> None:
        """Start building the int8 scanner (once) in a background thread."""
        with self._lock:
            if self._started or not self.wanted:
                return
            self._started = True
        threading.Thread(target=self._build, name="toolsearch-int8-scan", daemon=True).start()

    def _build(self) -> None:
        try:
            self._scanner = QuantizedScan(self.matrix)
            # glibc keeps the blocks the quantization freed (~20 MB more resident at 100,000 tools
            # with the matrix in two parts than in one, measured): hand them back. No collection:
            # it would hold the GIL over a large catalog's objects while searches wait.
            return_freed_memory(collect=False)
        except Exception:  # no ONNX Runtime, or no memory: the float32 scan still answers (logged)
            logger.exception("int8 tool scan unavailable; scanning the float32 vectors")
        finally:
            self._ready.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the scanner is built (or has failed); whether it is ready."""
        return self._ready.wait(timeout)

    @property
    def quantized(self) -> bool:
        return self._scanner is not None

    def rows(self, queries: np.ndarray, threads: int = 1) -> np.ndarray:
        """(rows, n) cosines: exact for each row's best tools, approximate (int8) for the rest;
        all exact before the scanner is ready and for small matrices. `threads` > 1 (a host with an
        idle core, concurrency.py): the scan's parts, then the rows' rescoring, two at a time; the
        same values."""
        scanner = self._scanner
        if scanner is None:
            if len(queries) == 1:  # a matrix-vector product reads the matrix faster than a 1-row matrix product
                return (self.matrix @ queries[0])[None, :]
            return queries @ self.matrix.T
        rows = scanner.cosines(queries, threads)
        keep = min(self.rescore, rows.shape[1])

        def rescore(r: int) -> None:
            row = rows[r]
            best = np.argpartition(row, row.size - keep)[row.size - keep:] if keep < row.size else np.arange(row.size)
            row[best] = self.matrix[best] @ queries[r]

        concurrency.run_all(rescore, range(len(queries)), threads)
        return rows


def scan_for(index: Any, **options: Any) -> VectorScan:
    """The `VectorScan` of a dense index (a SemanticIndex), made once and kept on it."""
    wanted = {"min_tools": options.get("min_tools", MIN_TOOLS), "rescore": options.get("rescore", RESCORE)}
    with _scan_lock:  # two searches of a fresh index must not build two scanners
        scan = getattr(index, "scan", None)
        if scan is None or scan.matrix is not index.vectors or scan.settings != wanted:
            scan = VectorScan(index.vectors, **wanted)
            index.scan = scan
    return scan


_scan_lock = threading.Lock()
