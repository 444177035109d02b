"""Ingest throughput of the real pipeline against the raw embedder, and re-ingests.

    python benchmarks/ingest.py [--docs 1000,10000] [--shared ../shared] [--cli]
                                [--raw-sample N]

Generates a corpus of Markdown, HTML and Editor.js documents from the real iDempiere fixtures
(Application Dictionary help texts and wiki pages) in a temporary folder, and for each size,
in a fresh process with a fresh embedded PostgreSQL under a temporary RAG_HOME, prints:

- documents/s and chunks/s of the first ingest (the real Dagster job, every stage) and the
  seconds of each stage;
- chunks/s of the raw embedder (both models with the multilingual second vector on, the
  default; RAG_MULTILINGUAL_MODEL=none for the first alone) on exactly the same chunk texts in
  the same process (with
  `--raw-sample N`, on an even sample of N of them, every k-th by chunk id), and the
  ratio of the two (target >= 0.90), by wall time and by CPU time (the pipeline process, its
  conversion workers and the PostgreSQL server: steadier when other work shares the machine);
- whether the pipeline's stored vectors equal the raw embedder's (a sample of 1,000);
- the peak resident memory of the whole process tree during the first ingest (the ingest
  process and its conversion workers; not the PostgreSQL server), sampled every 0.1 s
  (target <= 750 MiB, and <= 1.2 x the figure at the smallest size when several run);
- the database size;
- an unchanged re-ingest (target <= 3 % of the first) and one with 1 % of the documents
  edited (target <= 5 % of the first).

With `--cli` it also times the first ingest of the same corpus by `rag ingest --path` and by
`dagster job execute` of its partition, each its own process on its own fresh database, in
both orders (target: within 10 % of each other).
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
from collections import Counter
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
    # The wiki pages are spread among the entries (one after every `spread` of them), so even
    # the smallest corpus holds long pages and the model's arena grows as in a large one.
    spread = max(1, len(entries) // (len(wiki) + 1))
    written, cycle = 0, 0
    writers = ((".md", _markdown), (".html", _html), (".json", _editorjs))
    while written < count:
        # Past the fixtures' first pass every title names its pass: every chunk's text (which
        # carries its document's title) stays distinct, so the embedding cache never turns a
        # larger corpus into a smaller amount of model work.
        mark = f" (set {cycle + 1})" if cycle else ""
        pages = iter(wiki)
        for index, (title, description, help_text) in enumerate(entries):
            if written >= count:
                break
            related = [f"{t}: {d}" for t, d, _ in entries[index + 1 : index + 4]]
            suffix, writer = writers[written % 3]
            paragraphs = [p for p in (description, help_text) if p.strip()] or [title]
            name = f"ad/{written:06}{suffix}"
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(writer(title + mark, paragraphs, related), encoding="utf-8")
            written += 1
            if index % spread == spread - 1 and written < count:
                page = next(pages, None)
                if page is not None:
                    written = _write_page(folder, page, mark, entries, written)
        for page in pages:
            if written >= count:
                break
            written = _write_page(folder, page, mark, entries, written)
        cycle += 1
    return written


def _write_page(
    folder: Path, page: Path, mark: str, entries: list[tuple[str, str, str]], written: int
) -> int:
    """Write wiki page `page` as document number `written`; return the next number."""
    target = folder / "wiki" / f"{written:06}-{page.name}"
    target.parent.mkdir(parents=True, exist_ok=True)
    see_also = "\n".join(f"- {t}: {d}" for t, d, _ in entries[written % 500 : written % 500 + 3])
    text = _retitle(page.read_text(encoding="utf-8"), mark)
    target.write_text(text + f"\n\n## See also\n\n{see_also}\n", encoding="utf-8")
    return written + 1


def _retitle(page: str, mark: str) -> str:
    """A wiki page whose title (front matter's, else the first heading) ends with `mark`."""
    if not mark:
        return page
    lines = page.split("\n")
    in_front = bool(lines) and lines[0] == "---"
    for number, line in enumerate(lines):
        if in_front and number and line == "---":
            in_front = False
        elif in_front and line.startswith("title:"):
            # A JSON string is a valid YAML scalar, whatever the title holds.
            title = line.removeprefix("title:").strip().strip("\"'")
            lines[number] = f"title: {json.dumps(title + mark)}"
            return "\n".join(lines)
        elif not in_front and line.startswith("# "):
            lines[number] = line + mark
            return "\n".join(lines)
    return f"# Page{mark}\n\n{page}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--docs", default="2000", help="a size, or sizes separated by commas")
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    parser.add_argument(
        "--cli", action="store_true", help="also time `rag ingest` and `dagster job execute`"
    )
    parser.add_argument(
        "--profile",
        type=Path,
        help="write a cProfile of the first ingest here and print its SQL statements by caller",
    )
    parser.add_argument(
        "--raw-sample",
        type=int,
        default=0,
        help="time the raw embedder on an even sample of this many chunk texts (0: all); "
        "its chunks/s gives the ratio, for sizes whose full re-embedding takes too long",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not (args.shared / "fixtures").is_dir():
        sys.exit(f"fixtures not found under {args.shared}; pass --shared")
    if not args.child:
        peaks = {}
        for size in [int(n) for n in args.docs.split(",")]:
            print(f"=== {size} documents")
            command = [sys.executable, __file__, "--child", "--docs", str(size)]
            command += ["--shared", str(args.shared)] + (["--cli"] if args.cli else [])
            command += ["--raw-sample", str(args.raw_sample)]
            if args.profile:
                command += ["--profile", str(args.profile.resolve())]
            peaks[size] = measure_tree_peak(command)
            print(
                f"peak RSS of the ingest process tree (first ingest): {peaks[size] / 2**20:.0f} MiB"
                " (target <= 750 MiB)"
            )
        if len(peaks) > 1:
            small = min(peaks)
            for large in sorted(peaks)[1:]:
                print(
                    f"peak RSS {large} / {small} documents: {peaks[large] / peaks[small]:.2f} "
                    "(target <= 1.2)"
                )
        return

    with tempfile.TemporaryDirectory(prefix="rag-bench-") as tmp:
        home = embedded_home(Path(tmp))
        corpus = Path(tmp) / "corpus"
        documents = generate_corpus(args.shared, corpus, int(args.docs))
        size = sum(f.stat().st_size for f in corpus.rglob("*") if f.is_file())
        print(f"corpus: {documents} documents ({size / 1e6:.1f} MB)")
        try:
            run(corpus, home, args.profile, args.raw_sample)
            if args.cli:
                compare_commands(corpus, Path(tmp))
        finally:
            from rag_pipeline.settings import load_settings
            from rag_pipeline.store.server import stop_embedded_server

            stop_embedded_server(load_settings())


def embedded_home(folder: Path) -> Path:
    """A fresh RAG_HOME in `folder`, set for this process, on the embedded database."""
    home = folder / "home"
    home.mkdir()
    os.environ["RAG_HOME"] = str(home)
    for name in ("RAG_VECTORDB_URL", "RAG_VECTORDB_PG_HOST"):
        os.environ.pop(name, None)
    return home


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


# The op of each stage (asset `files/raw` runs as `files__raw`).
STAGES = ("files__raw", "files__markdown", "files__sanitized", "files__chunks", "files__embeddings")


def _cpu_seconds(pids: list[int]) -> float:
    """CPU seconds of processes and their reaped children, from /proc (0 for gone ones)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(v) for v in fields[11:15])  # utime stime cutime cstime
    return total / tick


def _server_pids(home: Path) -> list[int]:
    """The embedded PostgreSQL's postmaster and its live backends."""
    pid_file = home / "pgdata" / "postmaster.pid"
    if not pid_file.exists():
        return []
    root = int(pid_file.read_text().split()[0])
    pids = [root]
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as handle:
                    if int(handle.read().rsplit(")", 1)[1].split()[1]) == root:
                        pids.append(int(entry))
            except OSError:
                continue
    return pids


class CpuClock:
    """CPU seconds of this process, its reaped children and the database server."""

    def __init__(self, home: Path) -> None:
        self.home = home

    def now(self) -> float:
        return process_cpu() + _cpu_seconds(_server_pids(self.home))


def process_cpu() -> float:
    """CPU seconds of this process and its reaped children."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def edit_documents(corpus: Path, fraction: float) -> int:
    """Append a sentence to every 1/fraction-th document (in every format); return how many."""
    files = sorted(f for f in corpus.rglob("*") if f.is_file())
    step = max(1, round(1 / fraction))
    edited = 0
    for index, path in enumerate(files[::step]):
        text = path.read_text(encoding="utf-8")
        note = f"Edited note {index}: the record is reviewed every quarter."
        if path.suffix == ".json":
            data = json.loads(text)
            data["blocks"].append({"type": "paragraph", "data": {"text": note}})
            text = json.dumps(data)
        elif path.suffix == ".html":
            text = text.replace("</body>", f"<p>{note}</p></body>")
        else:
            text += f"\n{note}\n"
        path.write_text(text, encoding="utf-8")
        edited += 1
    return edited


def count_statements() -> Counter[str]:
    """Count the SQL statements psycopg sends (execute, executemany, COPY) by calling function."""
    import traceback

    import psycopg

    counts: Counter[str] = Counter()

    def caller() -> str:
        for frame in reversed(traceback.extract_stack(limit=12)[:-2]):
            if "rag_pipeline" in frame.filename:
                return f"{Path(frame.filename).name}:{frame.name}"
        return "other"

    for name in ("execute", "executemany", "copy"):
        original = getattr(psycopg.Cursor, name)

        def counted(
            self: Any, *args: Any, __original: Any = original, __name: str = name, **kwargs: Any
        ) -> Any:
            counts[f"{__name} {caller()}"] += 1
            return __original(self, *args, **kwargs)

        setattr(psycopg.Cursor, name, counted)
    return counts


def run(corpus: Path, home: Path, profile: Path | None = None, raw_sample: int = 0) -> None:
    import dagster as dg
    import numpy as np

    from rag_pipeline.definitions import defs
    from rag_pipeline.operations.folders import register_folder
    from rag_pipeline.orchestration.source_registry import FILES
    from rag_pipeline.settings import load_settings
    from rag_pipeline.store.connection import connect
    from rag_pipeline.store.runtime import load_embedder, load_second_embedder, ready_conninfo

    settings = load_settings()
    # Warm-up outside the timings: server start, migrations, model load happen once per
    # process whatever the corpus size.
    conninfo = ready_conninfo(settings)
    embedder = load_embedder(settings)
    second_model = load_second_embedder(settings)
    job = defs().resolve_job_def(FILES.ingest_job)
    key = register_folder(settings, corpus).name
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("files_folders", [key])
    clock = CpuClock(home)

    def ingest() -> tuple[float, float, dict[str, Any]]:
        started, cpu = time.perf_counter(), clock.now()
        result = job.execute_in_process(
            instance=instance,
            partition_key=key,
            run_config={"loggers": {"console": {"config": {"log_level": "ERROR"}}}},
        )
        elapsed, cpu = time.perf_counter() - started, clock.now() - cpu
        assert result.success
        stages: dict[str, dict[str, Any]] = {}
        for node in STAGES:
            (m,) = result.asset_materializations_for_node(node)
            stages[node] = {k: v.value for k, v in m.metadata.items()}
        return elapsed, cpu, stages

    if profile is None:
        first, first_cpu, stages = ingest()
    else:
        import cProfile

        statements = count_statements()
        profiler = cProfile.Profile()
        first, first_cpu, stages = profiler.runcall(ingest)
        profiler.dump_stats(profile)
        print(f"SQL statements of the first ingest ({sum(statements.values())}), by caller:")
        for site, count in statements.most_common():
            print(f"  {count:6} {site}")
    if os.environ.get(PHASE_FILE):
        Path(os.environ[PHASE_FILE]).touch()
    stats = stages["files__embeddings"]
    with connect(conninfo) as conn:
        texts = [r[0] for r in conn.execute("SELECT embedded_text FROM rag.chunks ORDER BY id")]
        distinct = len(set(texts))
        database_bytes = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    chunks = len(texts)
    print(
        f"first ingest: {first:.1f} s ({first_cpu:.1f} CPU s), {stats['documents_new']} "
        f"documents, {chunks} chunks ({distinct} distinct texts), "
        f"{stats['documents_failed']} failed"
    )
    for node, meta in stages.items():
        print(f"  {node:<17} {meta.get('seconds', 0):7.2f} s")
    print(f"  (embedding inside files/embeddings: {stats['embed_seconds']:.2f} s)")
    conversion = stages["files__markdown"]["seconds"]
    print(
        f"format conversion: {100 * conversion / first:.1f} % of the first ingest (target <= 5 %)"
    )

    # An even sample (every k-th text by chunk id) has the corpus's length mix.
    every = max(1, chunks // raw_sample) if raw_sample else 1
    sample = texts[::every]
    started, cpu = time.perf_counter(), clock.now()
    raw_vectors = embedder.embed_passages(sample)
    if second_model is not None:  # the pipeline embeds every text with both models
        second_model.embed_passages(sample)
    raw, raw_cpu = time.perf_counter() - started, clock.now() - cpu

    pipeline_rate = chunks / first
    raw_rate = len(sample) / raw
    print(
        f"pipeline: {stats['documents_new'] / first:7.1f} documents/s {pipeline_rate:7.1f} chunks/s"
    )
    which = f"the same {chunks}"
    if second_model is not None:
        which += f" (and {second_model.model_id}, the second vector)"
    if every > 1:
        which = f"every {every}th of the {chunks} ({len(sample)})"
    print(
        f"raw embedder on {which} texts: {raw:.1f} s ({raw_cpu:.1f} CPU s), {raw_rate:.1f} chunks/s"
    )
    print(f"pipeline / raw embedder: {pipeline_rate / raw_rate:.2f} (target >= 0.90)")
    print(
        f"pipeline / raw embedder by CPU time: {(raw_cpu / len(sample)) / (first_cpu / chunks):.2f}"
    )

    step = max(1, len(sample) // 1000)
    with connect(conninfo) as conn:
        stored = [
            np.asarray(r[0].to_numpy(), dtype=np.float32)
            for r in conn.execute("SELECT embedding FROM rag.chunks ORDER BY id")
        ][::every][::step]
    differences = np.abs(np.stack(stored) - raw_vectors[::step]) if stored else np.zeros(1)
    identical = int((differences.max(axis=-1) == 0).sum()) if stored else 0
    print(
        f"stored vectors equal to the raw embedder's: {identical} of {len(stored)} sampled "
        f"(max |difference| {differences.max():.2e})"
    )
    del raw_vectors, texts, stored
    print(f"database size: {int(database_bytes[0]) / 2**20:.0f} MiB" if database_bytes else "")

    second, second_cpu, stages = ingest()
    unchanged = stages["files__embeddings"]
    print(
        f"unchanged re-ingest: {second:.2f} s ({second_cpu:.1f} CPU s) = "
        f"{100 * second / first:.1f} % of the first (target <= 3 %); "
        f"{unchanged['chunks_embedded']} chunks embedded, "
        f"{unchanged['documents_unchanged']} documents unchanged"
    )

    edited = edit_documents(corpus, 0.01)
    third, third_cpu, stages = ingest()
    changed = stages["files__embeddings"]
    print(
        f"re-ingest with {edited} documents (1 %) edited: {third:.2f} s ({third_cpu:.1f} CPU s) "
        f"= {100 * third / first:.1f} % of the first (target <= 5 %); "
        f"{changed['documents_changed']} documents changed, "
        f"{changed['chunks_embedded']} chunks embedded"
    )


def compare_commands(corpus: Path, tmp: Path) -> None:
    """Time the first ingest of `corpus` by `rag ingest` and by `dagster job execute`."""
    key = "corpus"  # the folder's name, registered below as a person would
    commands = {
        "rag ingest": [sys.executable, "-m", "rag_pipeline.cli", "ingest", "--path", str(corpus)],
        "dagster job execute": [
            str(Path(sys.executable).with_name("dagster")),
            "job",
            "execute",
            "-m",
            "rag_pipeline.definitions",
            "-j",
            "files_ingest_job",
            "--tags",
            json.dumps({"dagster/partition": key}),
        ],
    }
    seconds: dict[str, list[float]] = {name: [] for name in commands}
    # Both orders, so a load that moves during the pair shows as a difference between them.
    order = [*commands, *reversed(commands)]
    for turn, name in enumerate(order):
        home = tmp / f"{name.replace(' ', '-')}-{turn}"
        env = {**os.environ, "RAG_HOME": str(home), "DAGSTER_HOME": str(home / "dagster")}
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
        # Server start and migrations outside the timing, as for `run`; the partition is
        # registered as a person would before `dagster job execute`.
        cli = [sys.executable, "-m", "rag_pipeline.cli"]
        subprocess.run(
            [*cli, "folders", "add", key, str(corpus)],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        subprocess.run([*cli, "status"], env=env, check=True, stdout=subprocess.DEVNULL)
        started = time.perf_counter()
        subprocess.run(
            commands[name],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        seconds[name].append(time.perf_counter() - started)
        _stop_server(home)
        print(
            f"{name}: {seconds[name][-1]:.1f} s for the first ingest "
            "(own process, model load included)"
        )
    for pair in (0, 1):
        ratio = seconds["dagster job execute"][pair] / seconds["rag ingest"][pair]
        which = "rag ingest first" if pair == 0 else "dagster job execute first"
        print(f"dagster job execute / rag ingest, {which}: {ratio:.2f} (target 0.90-1.10)")


def _stop_server(home: Path) -> None:
    from rag_pipeline.settings import load_settings
    from rag_pipeline.store.server import stop_embedded_server

    saved = os.environ.get("RAG_HOME")
    os.environ["RAG_HOME"] = str(home)
    try:
        stop_embedded_server(load_settings())
    finally:
        if saved is not None:
            os.environ["RAG_HOME"] = saved


if __name__ == "__main__":
    main()
