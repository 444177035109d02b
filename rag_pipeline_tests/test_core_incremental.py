"""The incremental step every stage shares: plan, compute, fail per document, in parallel."""

import json

from rag_pipeline.core.document_stages import to_markdown_record
from rag_pipeline.core.incremental import (
    PARALLEL_MIN_DOCUMENTS,
    StageRecord,
    input_hash,
    plan,
    run_stage,
)


def test_plan_keeps_unchanged_and_recomputes_changed_new_and_forced() -> None:
    upstream = {"same": "h1", "edited": "h2-new", "new": "h3"}
    previous = {"same": input_hash("h1", "fp"), "edited": input_hash("h2", "fp"), "gone": "x"}
    work = plan(upstream, previous, "fp")
    assert work.kept == {"same"}
    assert set(work.todo) == {"edited", "new"}
    assert set(plan(upstream, previous, "fp", force=True).todo) == set(upstream)
    # A new stage setting (fingerprint) recomputes everything.
    assert set(plan(upstream, previous, "fp2").todo) == set(upstream)


def _raw(key: str, body: str, fmt: str) -> StageRecord:
    meta = {
        "source_type": "files",
        "source_id": key,
        "language": "",
        "original_format": fmt,
        "source_version": "v",
        "url": "",
    }
    return StageRecord(key, meta, body)


def _run(records: list[StageRecord], workers: int, previous: dict[str, str]):  # type: ignore[no-untyped-def]
    upstream = {r.doc_key: r.content_hash for r in records}
    work = plan(upstream, previous, "fp")
    by_key = {r.doc_key: r for r in records}
    return run_stage(
        source_type="files",
        partition_key="p",
        stage="markdown",
        work=work,
        previous_inputs=previous,
        load=lambda keys: [by_key[k] for k in keys],
        transform=to_markdown_record,
        workers=workers,
    )


def test_parallel_and_serial_give_the_same_output_and_failures() -> None:
    records = [
        _raw(f"doc{i:03}.md", f"# Page {i}\n\nSome *text* about locator {i}.\n", "markdown")
        for i in range(PARALLEL_MIN_DOCUMENTS + 50)
    ]
    records.append(_raw("broken.json", '{"blocks": "not a list"}', "editorjs"))
    records.append(_raw("was-good.json", "not json at all", "editorjs"))
    previous = {"was-good.json": "an older input"}

    serial = _run(records, 1, previous)
    parallel = _run(records, 2, previous)

    assert parallel.changed == serial.changed
    assert len(serial.changed) == PARALLEL_MIN_DOCUMENTS + 50
    assert [(f.source_id, f.reason) for f in parallel.failed] == [
        (f.source_id, f.reason) for f in serial.failed
    ]
    assert {f.source_id for f in serial.failed} == {"broken.json", "was-good.json"}
    # A document that failed keeps its previous version; one never good has none to keep.
    assert serial.kept == parallel.kept == {"was-good.json"}
    assert serial.changed["doc007.md"][1].meta["title"] == "Page 7"
    assert json.dumps(serial.counts()) == json.dumps(parallel.counts())
