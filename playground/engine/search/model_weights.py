"""The digest of a model folder's weights: the encoder's cache key and the saved int8 model's name
both need it (its own module so that `encoder` and `onnx_encoder` need not import each other)."""
from __future__ import annotations

import functools
import hashlib
from pathlib import Path


def weights_digest(model_dir: Path) -> str:
    """sha1 (hex) of the folder's model.safetensors, read once per version of the file (it is 90 MB)."""
    weights = (model_dir / "model.safetensors").resolve()
    found = weights.stat()
    return _file_sha1(str(weights), found.st_size, found.st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _file_sha1(path: str, size: int, mtime_ns: int) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha1").hexdigest()
