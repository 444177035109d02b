"""`rag search` and `rag eval`: hybrid search and its quality on a labelled set.

Kept apart from cli.py and light to import: the search path loads neither Dagster nor the
converters, so a cold `rag search` costs the model load and one query.
"""

import gc
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from rag_pipeline.evaluation.metrics import EvalReport
    from rag_pipeline.search import PreparedQuery, Query, Searcher, SearchHit

_MODES = ("hybrid", "vector", "keyword")


@contextmanager
def _one_line_errors() -> Iterator[None]:
    """Bad input and known failures print one line (exit 1), never a traceback."""
    import psycopg

    from rag_pipeline.cli.errors import error_message
    from rag_pipeline.core.embedding import EmbeddingModelError
    from rag_pipeline.settings import ConfigError
    from rag_pipeline.store.migrations import ModelMismatchError
    from rag_pipeline.store.server import EmbeddedServerError

    try:
        yield
    except (ValueError, ConfigError, EmbeddingModelError, ModelMismatchError) as exc:
        raise click.ClickException(str(exc)) from exc
    except psycopg.errors.DiskFull as exc:
        raise click.ClickException(error_message(exc) or str(exc)) from exc
    except psycopg.OperationalError as exc:  # unreachable server, or no free pooled connection
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise click.ClickException(f"the vector database cannot be reached: {first}") from exc
    except EmbeddedServerError as exc:
        raise click.ClickException(error_message(exc) or str(exc)) from exc
    except BrokenPipeError:
        # The reader went away (`rag search --queries q.jsonl --json | head`): stop quietly, as
        # Unix tools do; stdout goes to devnull so the interpreter's last flush fails no more.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    except OSError as exc:
        raise click.ClickException(error_message(exc) or f"{type(exc).__name__}: {exc}") from exc


def _searcher() -> "Searcher":
    """The Searcher, its modules, model and vocabulary loaded without a cyclic collection.

    What loads lives as long as the process and holds no garbage, yet the collector ran again
    and again while it came, over more of it each time. Frozen once loaded, it is out of the
    way of the collections that follow (`--queries`).
    """
    gc.disable()
    try:
        from rag_pipeline.search import Searcher
        from rag_pipeline.settings import load_settings

        return Searcher(load_settings())
    finally:
        gc.freeze()
        gc.enable()


def _where(hit: "SearchHit") -> str:
    return " › ".join(p for p in (hit.title, *hit.heading_path[1:]) if p)


def _print_table(title: str, hits: "list[SearchHit]", explain: bool, caption: str = "") -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not hits:
        console.print("no results (is anything ingested? try `rag status`)")
        return
    table = Table(
        title=title if len(title) <= 160 else title[:159] + "…",
        title_justify="left",
        caption=caption or None,
        caption_justify="left",
        expand=True,
        show_lines=True,
    )
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("score", justify="right", no_wrap=True)
    table.add_column("where", ratio=2, overflow="fold")
    table.add_column("text", ratio=3)
    if explain:
        table.add_column("vector", justify="right", no_wrap=True)
        table.add_column("keyword", justify="right", no_wrap=True)
    for rank, hit in enumerate(hits, 1):
        snippet = " ".join(hit.text.split())
        row = [
            str(rank),
            f"{hit.score:.3f}",
            f"{_where(hit)}\n{hit.source_type} · {hit.language} · {hit.source_id}",
            snippet[:300] + ("…" if len(snippet) > 300 else ""),
        ]
        if explain and hit.explain is not None:
            legs = hit.explain
            row.append(
                "-" if legs.vector_rank is None else f"#{legs.vector_rank} {legs.vector_score:.3f}"
            )
            row.append(
                "-"
                if legs.keyword_rank is None
                else f"#{legs.keyword_rank} {legs.keyword_score:.2f}"
            )
        table.add_row(*row)
    console.print(table, markup=False)


def _batch(searcher: "Searcher", path: Path, options: dict[str, Any], as_json: bool) -> None:
    """One JSON line per query line; a bad query is reported on its line, the rest run."""
    if not as_json:
        raise click.UsageError("--queries runs a batch and prints JSON lines: add --json")
    failed = 0
    limit = searcher.settings.search_max_batch
    lines: list[tuple[int, str]] = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if line.strip():
                lines.append((number, line))
            if len(lines) > limit:  # refused before any is searched, and read no further
                raise ValueError(f"{path}: more than {limit:,} queries (RAG_SEARCH_MAX_BATCH)")
    for number, line in lines:
        try:
            record = json.loads(line)
            if not isinstance(record, dict) or not isinstance(record.get("text"), str):
                raise ValueError('expected {"id": ..., "text": ...}')
            ident = record.get("id", number)
            hits = searcher.search(record["text"], **options)
            out: dict[str, Any] = {"id": ident, "hits": [h.to_dict() for h in hits]}
        except ValueError as exc:
            failed += 1
            out = {"id": number, "error": f"line {number}: {exc}"}
        click.echo(json.dumps(out, ensure_ascii=False))
    if failed:
        click.echo(f"{failed} queries failed", err=True)
        sys.exit(1)


def register(main: click.Group) -> None:
    """Add `search` and `eval` to the `rag` command group."""
    main.add_command(search)
    main.add_command(evaluate_command)


@click.command()
@click.argument("query", required=False)
@click.option("--top-k", "-k", default=5, show_default=True, type=click.IntRange(1, 1000))
@click.option(
    "--mode",
    type=click.Choice(_MODES),
    help="hybrid (vector + keyword, fused), vector or keyword. [default: RAG_SEARCH_MODE]",
)
@click.option("--source", "sources", multiple=True, help="Only this source type (repeatable).")
@click.option(
    "--lang",
    "languages",
    multiple=True,
    help="Only this language, e.g. es_CO or es (repeatable); one also sets the query's.",
)
@click.option("--query-lang", help="The query's language (default: detected).")
@click.option("--breadcrumb", help="Only documents whose breadcrumb starts with this.")
@click.option("--min-score", type=float, help="Drop hits scoring below this.")
@click.option(
    "--per-document",
    type=click.IntRange(0),
    help="Sections of one document listed before the next documents' (0: no limit). "
    "[default: RAG_SEARCH_SECTIONS_PER_DOCUMENT]",
)
@click.option(
    "--expand",
    type=click.Choice(["parent", "chunk"]),
    default="parent",
    show_default=True,
    help="Return each hit's whole parent section, or only the matching chunk.",
)
@click.option(
    "--explain",
    is_flag=True,
    help="Show each leg's rank and score per hit, and the words the search vocabulary added.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the hits as JSON.")
@click.option(
    "--queries",
    "queries_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help='Run every {"id", "text"} line of a JSONL file (with --json: one line each).',
)
def search(
    query: str | None,
    top_k: int,
    mode: str | None,
    sources: tuple[str, ...],
    languages: tuple[str, ...],
    query_lang: str | None,
    breadcrumb: str | None,
    min_score: float | None,
    per_document: int | None,
    expand: str,
    explain: bool,
    as_json: bool,
    queries_file: Path | None,
) -> None:
    """Search the index (hybrid: vector + keyword with identifiers) and print the best
    sections. A misspelled word is searched as the word meant (the table says so;
    RAG_SEARCH_TYPO_CORRECTION=false turns it off)."""
    if (query is None) == (queries_file is None):
        raise click.UsageError("give a QUERY or --queries FILE")
    options: dict[str, Any] = {
        "top_k": top_k,
        "mode": mode,
        "source_types": sources or None,
        "languages": languages or None,
        "language": query_lang,
        "breadcrumb": breadcrumb,
        "min_score": min_score,
        "sections_per_document": per_document,
        "explain": explain,
        "expand": "chunk" if expand == "chunk" else "parent",
    }
    with _one_line_errors():
        searcher = _searcher()
        if queries_file is not None:
            _batch(searcher, queries_file, options, as_json)
            return
        assert query is not None
        typed = searcher.prepare(query, query_lang, languages)
        searched = searcher.corrected(typed)
        prepared = None
        hits = searcher.search(searched, **options)
        title, caption = query, ""
        if searched.text != typed.text:
            title = f"{query}  (searched as: {searched.text})"
        if explain and not as_json:
            caption = _explain_caption(searcher, searched, options["mode"])
            prepared = searcher.understand(searched, options["mode"], query_lang, languages)
    if as_json:
        click.echo(json.dumps([h.to_dict() for h in hits], ensure_ascii=False, indent=2))
    else:
        _print_table(title, hits, explain, caption)
    if prepared is not None:
        _print_understanding(searcher, prepared)


def _explain_caption(searcher: "Searcher", searched: "Query", mode: Any) -> str:
    """What `--explain` says under the table: the words the search vocabulary added."""
    added = searcher.expansion(searched)
    caption = f"search vocabulary added: {added}" if added else ""
    similar = searcher.added_words(searched, mode).similar
    if similar:
        caption += "; " if caption else ""
        caption += (
            f"closest vocabulary phrase {similar.phrase!r} "
            f"({similar.similarity:.2f}) added: {similar.expansion}"
            + (" (keyword leg only)" if similar.shared_words == 1 else "")
        )
    named = searcher.named(searched)
    if named:
        caption += f"; read as another name for the title {named!r}"
    return caption


def _print_understanding(searcher: "Searcher", prepared: "PreparedQuery") -> None:
    # What the query was understood as, and every ranking constant in effect.
    for what, value in prepared.describe():
        click.echo(f"{what:<20}{value}")
    click.echo("ranking (RAG_SEARCH_RANKING='name=value,...' overrides the unnamed):")
    for name, value, why in searcher.ranking.describe():
        click.echo(f"  {name:<30}{value!s:<8}{why}")


@click.command("eval")
@click.option(
    "--set",
    "set_files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help='A labelled set, JSONL: {"id", "question", "language", "relevant": [{"source_type", '
    '"source_id", "grade"}]} per line (repeatable).',
)
@click.option(
    "--queries",
    "queries_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help='Or the older pair: JSONL with {"id", "text"} per line (optional "language")...',
)
@click.option(
    "--qrels",
    "qrels_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="...and TSV: query_id, source_type, source_id, grade.",
)
@click.option("--mode", type=click.Choice(_MODES), help="[default: RAG_SEARCH_MODE]")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def evaluate_command(
    set_files: tuple[Path, ...],
    queries_file: Path | None,
    qrels_file: Path | None,
    mode: str | None,
    as_json: bool,
) -> None:
    """Score search on labelled sets: nDCG@10, Recall@5, Recall@10, MRR@10, hit@1.

    Labelled documents the index does not hold are left out of the scores and listed."""
    from rag_pipeline.evaluation.labelled_sets import load_pair, load_set
    from rag_pipeline.evaluation.scoring import score_sets

    if (queries_file is None) != (qrels_file is None):
        raise click.UsageError("--queries and --qrels go together")
    if not set_files and queries_file is None:
        raise click.UsageError("give --set FILE, or --queries FILE --qrels FILE")
    with _one_line_errors():
        sets = [load_set(path) for path in set_files]
        if queries_file is not None and qrels_file is not None:
            sets.append(load_pair(queries_file, qrels_file))
        quality = score_sets(_searcher(), sets, mode=mode)  # type: ignore[arg-type]
    report = quality.as_eval_report()
    if as_json:
        body = report.to_dict() | {
            "unknown_documents": [str(u) for u in quality.unknown],
            "unscored": quality.unscored,
        }
        click.echo(json.dumps(body, ensure_ascii=False, indent=2))
        return
    _print_report(report)
    click.echo(f"{len(report.queries)} labelled queries")
    if quality.unknown:
        click.echo(f"{len(quality.unknown)} labelled documents are not in the index (not scored):")
        for unknown in quality.unknown:
            click.echo(f"  {unknown}")
    if quality.unscored:
        click.echo(f"not scored (no labelled document in the index): {', '.join(quality.unscored)}")


def _print_report(report: "EvalReport") -> None:
    from rag_pipeline.evaluation.metrics import METRICS

    header = f"{'query':<14}{'lang':<7}" + "".join(f"{m:>11}" for m in METRICS)
    click.echo(header)
    for result in report.queries:
        click.echo(
            f"{result.id:<14}{result.language:<7}"
            + "".join(f"{result.metrics[m]:>11.3f}" for m in METRICS)
        )
    click.echo("-" * len(header))
    for language, values in report.by_language.items():
        click.echo(f"{'mean':<14}{language:<7}" + "".join(f"{values[m]:>11.3f}" for m in METRICS))
    click.echo(f"{'mean':<14}{'all':<7}" + "".join(f"{report.overall[m]:>11.3f}" for m in METRICS))
