"""Ingest throughput of the real pipeline against the raw embedder, and unchanged re-ingest.

    python benchmarks/ingest.py [--docs 2000] [--shared ../shared]

Generates a corpus of Markdown, HTML and Editor.js documents from the real iDempiere fixtures
(Application Dictionary help texts and wiki pages) in a temporary folder, starts a fresh
embedded PostgreSQL under a temporary RAG_HOME, then prints:

- documents/s and chunks/s of the first ingest (the real Dagster job, every stage);
- chunks/s of the raw embedder on exactly the same chunk texts in the same process;
- the ratio of the two (target ≥ 0.8);
- the time of an unchanged re-ingest as a fraction of the first (target ≤ 5 %);
- the peak resident memory of the whole process tree (the ingest process and its conversion
  workers; not the PostgreSQL server), sampled every 0.1 s.

    python benchmarks/ingest.py --docs 1000,10000

runs each size in a fresh process and prints the peak RSS of each and their ratio
(target: ≤ 1.5 GB at 10,000 documents and ≤ 1.3 × the figure at 1,000).
"""

import argparse
import csv
import html
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return [row for row in csv.DictReader(handle) if (row.get("Name") or "").strip()]


def _editorjs(title: str, paragraphs: list[str], items: list[str]) -> str:
    blocks: list[dict[str, Any]] = [{"type": "header", "data": {"text": title, "level": 1}}]
    blocks += [{"type": "paragraph", "data": {"text": html.escape(p)}} for p in paragraphs]
    blocks.append(
        {
            "type": "list",
            "data": {
                "style": "unordered",
                "meta": {},
                "items": [{"content": html.escape(i), "meta": {}, "items": []} for i in items],
            },
        }
    )
    return json.dumps({"time": 1, "version": "2.31.0", "blocks": blocks})


def _html(title: str, paragraphs: list[str], items: list[str]) -> str:
    body = "".join(f"<p>{html.escape(p)}</p>" for p in paragraphs)
    listed = "".join(f"<li>{html.escape(i)}</li>" for i in items)
    return (
        f"<html><head><title>{html.escape(title)}</title></head><body>"
        f"<h1>{html.escape(title)}</h1>{body}<h2>Related</h2><ul>{listed}</ul></body></html>"
    )


def _markdown(title: str, paragraphs: list[str], items: list[str]) -> str:
    text = "\n\n".join(paragraphs)
    listed = "\n".join(f"- {i}" for i in items)
    return f"# {title}\n\n{text}\n\n## Related\n\n{listed}\n"


def generate_corpus(shared: Path, folder: Path, count: int) -> int:
    """Write at least `count` documents made from the fixtures; return how many."""
    ad = shared / "fixtures" / "ad" / "core_es_CO"
    entries: list[tuple[str, str, str]] = []
    for file, kind in (
        ("ad_window.csv", "Window"),
        ("ad_process.csv", "Process"),
        ("ad_tab.csv", "Tab"),
        ("ad_field.csv", "Field"),
        ("ad_element.csv", "Element"),
    ):
        for row in _rows(ad / file):
            entries.append(
                (
                    f"{row['Name'].strip()} ({kind})",
                    row.get("Description") or "",
                    row.get("Help") or "",
                )
            )
    wiki = sorted((shared / "fixtures" / "wiki" / "docs_md").glob("*.md"))
    written = 0
    writers = ((".md", _markdown), (".html", _html), (".json", _editorjs))
    while written < count:
        for index, (title, description, help_text) in enumerate(entries):
            if written >= count:
                break
            related = [f"{t}: {d}" for t, d, _ in entries[index + 1 : index + 4]]
            suffix, writer = writers[written % 3]
            paragraphs = [p for p in (description, help_text) if p.strip()] or [title]
            name = f"ad/{written:05}{suffix}"
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(writer(title, paragraphs, related), encoding="utf-8")
            written += 1
        for page in wiki:
            if written >= count:
                break
            target = folder / "wiki" / f"{written:05}-{page.name}"
            target.parent.mkdir(parents=True, exist_ok=True)
            see_also = "\n".join(
                f"- {t}: {d}" for t, d, _ in entries[written % 500 : written % 500 + 3]
            )
            target.write_text(page.read_text(encoding="utf-8") + f"\n\n## See also\n\n{see_also}\n")
            written += 1
    return written


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--docs", default="2000", help="a size, or sizes separated by commas")
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not (args.shared / "fixtures").is_dir():
        sys.exit(f"fixtures not found under {args.shared}; pass --shared")
    if not args.child:
        peaks = {}
        for size in [int(n) for n in args.docs.split(",")]:
            print(f"=== {size} documents")
            command = [sys.executable, __file__, "--child", "--docs", str(size)]
            command += ["--shared", str(args.shared)]
            peaks[size] = measure_tree_peak(command)
            print(
                f"peak RSS of the ingest process tree (first ingest): {peaks[size] / 2**20:.0f} MiB"
            )
        if len(peaks) > 1:
            small, large = min(peaks), max(peaks)
            print(
                f"peak RSS {large} / {small} documents: {peaks[large] / peaks[small]:.2f} "
                "(target <= 1.3)"
            )
        return

    with tempfile.TemporaryDirectory(prefix="rag-bench-") as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        os.environ["RAG_HOME"] = str(home)
        for name in ("RAG_VECTORDB_URL", "RAG_VECTORDB_PG_HOST"):
            os.environ.pop(name, None)
        corpus = Path(tmp) / "corpus"
        documents = generate_corpus(args.shared, corpus, int(args.docs))
        size = sum(f.stat().st_size for f in corpus.rglob("*") if f.is_file())
        print(f"corpus: {documents} documents ({size / 1e6:.1f} MB)")
        try:
            run(corpus, home)
        finally:
            from rag_pipeline.settings import load_settings
            from rag_pipeline.store.server import stop_embedded_server

            stop_embedded_server(load_settings())


def _tree_rss(root: int) -> int:
    """Resident bytes of `root` and all its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry)
        children.setdefault(int(fields[1]), []).append(pid)
        rss[pid] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total


PHASE_FILE = "RAG_BENCH_INGESTED"


def measure_tree_peak(command: list[str]) -> int:
    """Run `command`, echoing its output; the peak RSS of its process tree while it ingests.

    The child creates the file named by $RAG_BENCH_INGESTED when its first ingest is done;
    what it does after (the raw-embedder comparison) is not counted.
    """
    marker = Path(tempfile.mkdtemp(prefix="rag-bench-phase-")) / "ingested"
    process = subprocess.Popen(command, env={**os.environ, PHASE_FILE: str(marker)})
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set() and not marker.exists():
            peak = max(peak, _tree_rss(process.pid))
            time.sleep(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    code = process.wait()
    done.set()
    sampler.join()
    if code != 0:
        sys.exit(code)
    return peak


def run(corpus: Path, home: Path) -> None:
    import dagster as dg

    from rag_pipeline.definitions import defs
    from rag_pipeline.operations.folders import register_folder
    from rag_pipeline.operations.runtime import load_embedder, ready_conninfo
    from rag_pipeline.orchestration.source_registry import FILES
    from rag_pipeline.settings import load_settings
    from rag_pipeline.store.connection import connect

    settings = load_settings()
    # Warm-up outside the timings: server start, migrations, model load happen once per
    # process whatever the corpus size.
    conninfo = ready_conninfo(settings)
    embedder = load_embedder(settings)
    job = defs().resolve_job_def(FILES.ingest_job)
    key = register_folder(settings, corpus).name
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("files_folders", [key])

    def ingest() -> tuple[float, dict[str, Any]]:
        started = time.perf_counter()
        result = job.execute_in_process(
            instance=instance,
            partition_key=key,
            run_config={"loggers": {"console": {"config": {"log_level": "ERROR"}}}},
        )
        elapsed = time.perf_counter() - started
        assert result.success
        stages = {}
        for node in (
            "files_raw",
            "files_markdown",
            "files_sanitized",
            "files_chunks",
            "files_embeddings",
        ):
            (m,) = result.asset_materializations_for_node(node)
            stages[node] = {k: v.value for k, v in m.metadata.items()}
        return elapsed, stages

    first, stages = ingest()
    if os.environ.get(PHASE_FILE):
        Path(os.environ[PHASE_FILE]).touch()
    stats = stages["files_embeddings"]
    with connect(conninfo) as conn:
        texts = [r[0] for r in conn.execute("SELECT embedded_text FROM rag.chunks ORDER BY id")]
    chunks = len(texts)
    print(
        f"first ingest: {first:.1f} s, {stats['documents_new']} documents, {chunks} chunks, "
        f"{stats['documents_failed']} failed"
    )
    for node, meta in stages.items():
        print(f"  {node:<17} {meta.get('seconds', 0):7.2f} s")
    print(f"  (embedding inside files_embeddings: {stats['embed_seconds']:.2f} s)")
    conversion = stages["files_markdown"]["seconds"]
    print(f"format conversion: {100 * conversion / first:.1f} % of the first ingest (target < 5 %)")

    started = time.perf_counter()
    embedder.embed_passages(texts)
    raw = time.perf_counter() - started

    pipeline_rate = chunks / first
    raw_rate = chunks / raw
    print(
        f"pipeline: {stats['documents_new'] / first:7.1f} documents/s {pipeline_rate:7.1f} chunks/s"
    )
    print(f"raw embedder on the same {chunks} texts: {raw:.1f} s, {raw_rate:.1f} chunks/s")
    print(f"pipeline / raw embedder: {pipeline_rate / raw_rate:.2f} (target >= 0.80)")

    second, stages = ingest()
    unchanged = stages["files_embeddings"]
    print(
        f"unchanged re-ingest: {second:.2f} s = {100 * second / first:.1f} % of the first "
        f"(target <= 5 %); {unchanged['chunks_embedded']} chunks embedded, "
        f"{unchanged['documents_unchanged']} documents unchanged"
    )


if __name__ == "__main__":
    main()
