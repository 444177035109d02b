"""Peak memory and speed of the embedder by ONNX Runtime arena and batch size in tokens.

    python benchmarks/embedding_memory.py [--texts 2000] [--only TEXT]

Each setting runs in a fresh process (so one setting's arena cannot hide another's peak) over
the same texts: the chunk-sized Application Dictionary help texts of the fixtures, repeated
and cut to lengths between 20 and 250 tokens. Prints chunks/s and the process's peak RSS.
"""

import argparse
import csv
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SETTINGS = [
    ("arena on, 64 texts per batch (the first release)", True, 64, 1_000_000),
    ("arena off, 64 texts per batch", False, 64, 1_000_000),
    ("arena on, 8,192 tokens per batch", True, 256, 8192),
    ("arena off, 8,192 tokens per batch (the previous default)", False, 256, 8192),
    ("arena on, 4,096 tokens per batch", True, 256, 4096),
    ("arena off, 4,096 tokens per batch", False, 256, 4096),
    ("arena on, 2,048 tokens per batch", True, 256, 2048),
    ("arena on, 1,024 tokens per batch (default)", True, 256, 1024),
    ("arena off, 2,048 tokens per batch", False, 256, 2048),
]


def texts(shared: Path, count: int) -> list[str]:
    """`count` texts of mixed length made from the dictionary's help texts."""
    pool: list[str] = []
    with (shared / "fixtures" / "ad" / "core_es_CO" / "ad_window.csv").open(encoding="utf-8") as f:
        for row in csv.DictReader(f):
            text = " ".join(p for p in (row.get("Description"), row.get("Help")) if p)
            if text.strip():
                pool.append(text)
    words = " ".join(pool).split()
    result = []
    for i in range(count):
        length = 15 + (i * 37) % 180  # words: 20-250 tokens
        start = (i * 101) % max(1, len(words) - length)
        result.append(" ".join(words[start : start + length]))
    return result


def child(path: Path, arena: bool, max_texts: int, max_tokens: int) -> None:
    """Embed the texts in `path` with one setting; print JSON figures."""
    from rag_pipeline.core.embedding import ModelSpec, open_embedder

    items = json.loads(path.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as models:
        embedder = open_embedder(
            ModelSpec("all-MiniLM-L6-v2-int8"),
            models_dir=Path(models),
            batch_size=max_texts,
            batch_tokens=max_tokens,
            memory_arena=arena,
        )
        started = time.perf_counter()
        embedder.embed_passages(items)
        seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"seconds": seconds, "peak": peak}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--texts", type=int, default=2000)
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    parser.add_argument("--only", help="run only the settings whose label contains this")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        path, arena, max_texts, max_tokens = args.child
        child(Path(path), arena == "1", int(max_texts), int(max_tokens))
        return
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(texts(args.shared, args.texts), handle)
    print(f"{args.texts} texts, one fresh process per setting")
    for label, arena, max_texts, max_tokens in SETTINGS:
        if args.only and args.only not in label:
            continue
        command = [sys.executable, __file__, "--child", handle.name, str(int(arena))]
        command += [str(max_texts), str(max_tokens)]
        output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
        figures = json.loads(output.strip().splitlines()[-1])
        print(
            f"{label:<48} {args.texts / figures['seconds']:6.1f} chunks/s  "
            f"peak RSS {figures['peak'] / 2**20:6.0f} MiB"
        )


if __name__ == "__main__":
    main()
