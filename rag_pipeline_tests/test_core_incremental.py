"""The incremental step every stage shares: plan, compute, fail per document, in parallel."""

from collections.abc import Sequence

from rag_pipeline.core.document_stages import MarkdownStage
from rag_pipeline.core.incremental import (
    BATCH_DOCUMENTS,
    PARALLEL_MIN_DOCUMENTS,
    StageSummary,
    input_hash,
    plan,
    run_stage,
)
from rag_pipeline.core.models import SourceFormat
from rag_pipeline.core.records import DocumentInfo, MarkdownRecord, RawRecord
from rag_pipeline.core.source import ChainOptions


def test_plan_keeps_unchanged_and_recomputes_changed_new_and_forced() -> None:
    upstream = {"same": "h1", "edited": "h2-new", "new": "h3"}
    previous = {"same": input_hash("h1", "fp"), "edited": input_hash("h2", "fp"), "gone": "x"}
    work = plan(upstream, previous, "fp")
    assert work.kept == {"same"}
    assert set(work.todo) == {"edited", "new"}
    assert set(plan(upstream, previous, "fp", force=True).todo) == set(upstream)
    # A new stage setting (fingerprint) recomputes everything.
    assert set(plan(upstream, previous, "fp2").todo) == set(upstream)


def _raw(key: str, body: str, fmt: SourceFormat) -> RawRecord:
    return RawRecord(key, DocumentInfo("files", key, "", "", fmt, "v"), body)


def _run(
    records: list[RawRecord], workers: int, previous: dict[str, str]
) -> tuple[StageSummary, dict[str, MarkdownRecord], list[int]]:
    by_key = {r.key: r for r in records}
    stored: dict[str, MarkdownRecord] = {}
    loads: list[int] = []

    def load(keys: Sequence[str]) -> list[tuple[str, RawRecord]]:
        loads.append(len(keys))
        return [(k, by_key[k]) for k in keys]

    def store(rows: list[tuple[str, str, MarkdownRecord]]) -> None:
        stored.update({key: record for key, _, record in rows})

    summary = run_stage(
        stage="markdown",
        work=plan({r.key: r.body for r in records}, previous, "fp"),
        previous_inputs=previous,
        load=load,
        transform=MarkdownStage(ChainOptions()),
        store=store,
        workers=workers,
    )
    return summary, stored, loads


def test_parallel_and_serial_give_the_same_output_and_failures() -> None:
    records = [
        _raw(
            f"doc{i:03}.md",
            f"# Page {i}\n\nSome *text* about locator {i}.\n",
            SourceFormat.MARKDOWN,
        )
        for i in range(PARALLEL_MIN_DOCUMENTS + 50)
    ]
    records.append(_raw("broken.json", '{"blocks": "not a list"}', SourceFormat.EDITORJS))
    records.append(_raw("was-good.json", "not json at all", SourceFormat.EDITORJS))
    previous = {"was-good.json": "an older input"}

    serial, serial_out, loads = _run(records, 1, previous)
    parallel, parallel_out, _ = _run(records, 2, previous)

    assert parallel_out == serial_out
    assert len(serial_out) == PARALLEL_MIN_DOCUMENTS + 50
    assert [(f.source_id, f.reason) for f in parallel.failed] == [
        (f.source_id, f.reason) for f in serial.failed
    ]
    assert {f.source_id for f in serial.failed} == {"broken.json", "was-good.json"}
    # A document that failed keeps its previous version; one never good has none to keep.
    assert serial.kept == parallel.kept == {"was-good.json"}
    assert serial_out["doc007.md"].info.title == "Page 7"
    assert serial.counts() == parallel.counts()
    # Documents stream through in bounded batches, never all at once.
    assert max(loads) == BATCH_DOCUMENTS
    assert sum(loads) == len(records)


def test_a_rule_rejects_one_document_and_the_rest_is_stored() -> None:
    records = [
        _raw(f"d{i}.md", f"# Doc {i}\n\ntext {i}\n", SourceFormat.MARKDOWN) for i in range(5)
    ]
    stored: dict[str, MarkdownRecord] = {}
    summary = run_stage(
        stage="markdown",
        work=plan({r.key: r.body for r in records}, {}, "fp"),
        previous_inputs={"d3.md": "old"},
        load=lambda keys: [(r.key, r) for r in records if r.key in keys],
        transform=MarkdownStage(ChainOptions()),
        store=lambda rows: stored.update({k: r for k, _, r in rows}),
        reject=lambda record: "rule: no threes" if "3" in record.body else None,
    )
    assert sorted(stored) == ["d0.md", "d1.md", "d2.md", "d4.md"]
    assert [(f.source_id, f.stage, f.reason) for f in summary.failed] == [
        ("d3.md", "markdown", "rule: no threes")
    ]
    assert summary.kept == {"d3.md"}  # its previous version stays
    assert summary.counts() == {"new": 4, "changed": 0, "unchanged": 0, "failed": 1}


def test_a_document_over_its_budget_fails_alone_in_workers_as_in_process() -> None:
    records = [
        _raw(f"doc{i:03}.md", f"# Page {i}\n\ntext {i}\n", SourceFormat.MARKDOWN)
        for i in range(PARALLEL_MIN_DOCUMENTS + 20)
    ]
    # markdown-it and mdformat take about 20 s on this; the budget is 1 s.
    records.insert(7, _raw("doc006b.md", "[" * 200_000, SourceFormat.MARKDOWN))
    outcomes = []
    for workers in (1, 2):
        stored: dict[str, MarkdownRecord] = {}
        summary = run_stage(
            stage="markdown",
            work=plan({r.key: r.body for r in records}, {}, "fp"),
            previous_inputs={},
            load=lambda keys: [(r.key, r) for r in records if r.key in keys],
            transform=MarkdownStage(ChainOptions(), time_budget_seconds=1),
            store=lambda rows, into=stored: into.update({k: r for k, _, r in rows}),
            workers=workers,
        )
        outcomes.append((sorted(stored), [(f.source_id, f.reason) for f in summary.failed]))
    assert outcomes[0] == outcomes[1]
    names, failed = outcomes[1]
    assert failed == [
        (
            "doc006b.md",
            "markdown document took more than 1 s to convert (RAG_MAX_CONVERT_SECONDS)",
        )
    ]
    assert len(names) == PARALLEL_MIN_DOCUMENTS + 20  # every other document was converted
