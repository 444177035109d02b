"""The Dagster UI a person opens: the asset graph, an asset's page and its Materialize button.

`rag dev` (webserver and daemon) on loopback against an instance holding one real run of the
files job; Playwright drives Debian's `chromium` (never a downloaded browser). Screenshots are
kept in the test's tmp folder (`asset-graph.png`, `files_embeddings.png`, `catalog-run.png`,
`check-per-partition.png`, `retrieval-quality.png`, `retrieval-quality-check.png`); with
`RAG_SCREENSHOT_DIR` set they are copied there (how `docs/images/` is made).
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import httpx
import pytest

from rag_pipeline.orchestration.source_registry import SOURCES
from rag_pipeline.settings import Settings
from rag_pipeline_tests.pipeline_helpers import ingest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
STAGES = ("raw", "markdown", "sanitized", "chunks", "embeddings")

playwright_api = pytest.importorskip(
    "playwright.sync_api", reason="Playwright is not installed (pip install '.[test]')"
)
pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="Debian's chromium is missing: apt-get install -y chromium"
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def webserver(rag_env: Settings, tmp_path: Path) -> Iterator[str]:
    """The UI's URL: `rag dev` on an instance with one materialized files run."""
    from rag_pipeline.orchestration.instance import dagster_home

    os.environ["DAGSTER_HOME"] = str(tmp_path / "dagster_home")
    try:
        home = dagster_home(rag_env)
        with dg.DagsterInstance.from_config(str(home)) as instance:
            ingest("demo", instance)
    finally:
        del os.environ["DAGSTER_HOME"]
    port = _free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    log = (tmp_path / "webserver.log").open("w")
    # The daemon too: a run launched from the UI waits in the run queue until it takes it.
    process = subprocess.Popen(
        [sys.executable, "-m", "rag_pipeline.cli", "dev", "-h", "127.0.0.1", "-p", str(port)],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(f"{url}/server_info", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                output = (tmp_path / "webserver.log").read_text()[-2000:]
                pytest.fail(f"rag dev did not start: {output}")
            time.sleep(1)
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


def _runs_of_asset_job(url: str) -> dict[str, str]:
    """run id → status of the catalog's runs (the implicit asset job), from the UI's API."""
    query = (
        '{ runsOrError(filter: {pipelineName: "__ASSET_JOB"}) '
        "{ ... on Runs { results { runId status } } } }"
    )
    body = httpx.post(f"{url}/graphql", json={"query": query}, timeout=30).json()
    return {run["runId"]: run["status"] for run in body["data"]["runsOrError"]["results"]}


def _materialize_one_partition(page: "playwright_api.Page", url: str, partition: str) -> str:
    """Click Materialize on files/embeddings, pick one partition, launch; the run's id."""
    before = _runs_of_asset_job(url)
    page.goto(f"{url}/assets/files/embeddings")
    page.get_by_role("button", name="Materialize").first.click()
    page.get_by_text("Select a partition or create one").click()
    page.keyboard.type(partition)
    page.get_by_text("Select all (1)").click()
    page.keyboard.press("Escape")
    page.get_by_role("button", name="Launch 1 run").click()
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        new = {run: status for run, status in _runs_of_asset_job(url).items() if run not in before}
        if new and all(status in {"SUCCESS", "FAILURE", "CANCELED"} for status in new.values()):
            [(run_id, status)] = new.items()
            assert status == "SUCCESS", status
            return run_id
        time.sleep(1)
    pytest.fail("the run launched from the UI did not finish within 300 s")


def _graphql(url: str, query: str, variables: dict[str, object] | None = None) -> dict[str, Any]:
    response = httpx.post(
        f"{url}/graphql", json={"query": query, "variables": variables or {}}, timeout=60
    )
    body: dict[str, Any] = response.json()
    assert "errors" not in body, body
    return body["data"]


def _all_runs(url: str) -> dict[str, str]:
    """run id → status of every run (the UI picks the job a check runs in)."""
    data = _graphql(url, "{ runsOrError { ... on Runs { results { runId status } } } }")
    return {run["runId"]: run["status"] for run in data["runsOrError"]["results"]}


def _wait_for_new_run(url: str, job: str, before: dict[str, str]) -> str:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        new = {r: status for r, status in _all_runs(url).items() if r not in before}
        if new and all(status in {"SUCCESS", "FAILURE", "CANCELED"} for status in new.values()):
            [(run_id, status)] = new.items()
            assert status == "SUCCESS", (run_id, status)
            return run_id
        time.sleep(1)
    pytest.fail(f"the {job} run did not finish within 300 s")


_LAUNCH = """
mutation($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
  }
}
"""


def _run_check_alone_on_a_partition(url: str, check: str, partition: str) -> str:
    """What `rag check` runs, through the UI's API: the job, only the check, one partition."""
    before = _all_runs(url)
    params = {
        "selector": {
            "repositoryLocationName": "rag_pipeline.definitions",
            "repositoryName": "__repository__",
            "jobName": "files_ingest_job",
            "assetSelection": [],
            "assetCheckSelection": [{"assetKey": {"path": ["files", "embeddings"]}, "name": check}],
        },
        "runConfigData": "{}",
        "mode": "default",
        "executionMetadata": {"tags": [{"key": "dagster/partition", "value": partition}]},
    }
    launched = _graphql(url, _LAUNCH, {"params": params})["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    return _wait_for_new_run(url, "files_ingest_job", before)


def _check_evaluations(home: Path, run_id: str) -> list[tuple[str, str | None, bool]]:
    """(check, partition, passed) of a run's check results, from the instance's event log."""
    with dg.DagsterInstance.from_config(str(home)) as instance:
        records = instance.get_records_for_run(
            run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION
        ).records
    evaluations = [r.event_log_entry.dagster_event.event_specific_data for r in records]  # type: ignore[union-attr]
    return sorted((e.check_name, e.partition, e.passed) for e in evaluations)  # type: ignore[union-attr]


def test_asset_graph_and_an_asset_page_show_every_source_and_the_metadata(
    webserver: str, tmp_path: Path
) -> None:
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS
        )
        try:
            # Tall enough that the catalog's virtual list renders every row.
            page = browser.new_page(viewport={"width": 1600, "height": 2400})
            page.set_default_timeout(90_000)
            page.goto(f"{webserver}/assets")
            skip = page.get_by_role("button", name="Skip")  # the first-visit newsletter dialog
            skip.wait_for()
            skip.click()
            # The catalog lists every asset of every source, by its key (`files / raw`).
            for spec in SOURCES:
                for stage in STAGES:
                    name = " / ".join(spec.asset_key(stage).path)
                    page.get_by_text(name, exact=True).first.wait_for()
            page.get_by_text("ingest_errors", exact=True).first.wait_for()
            # The lineage graph of the files source.
            page.set_viewport_size({"width": 1600, "height": 760})
            page.goto(f"{webserver}/locations/rag_pipeline.definitions/asset-groups/files")
            # Its boxes are named by stage: the group says the source.
            page.get_by_text("embeddings", exact=True).first.wait_for()
            page.wait_for_timeout(3000)  # let the layout settle before the picture
            page.screenshot(path=str(tmp_path / "asset-graph.png"))
            # One asset's page: its last materialization's metadata.
            page.set_viewport_size({"width": 1600, "height": 1400})
            page.goto(f"{webserver}/assets/files/embeddings")
            page.get_by_text("chunks_embedded").first.wait_for()
            page.get_by_text("documents_new").first.wait_for()
            page.screenshot(path=str(tmp_path / "files_embeddings.png"))
            # Materialize one partition from the catalog: it runs through the queue, in process.
            run_id = _materialize_one_partition(page, webserver, "demo")
            page.goto(f"{webserver}/runs/{run_id}")
            page.get_by_text("Executing steps in process").first.wait_for()
            page.screenshot(path=str(tmp_path / "catalog-run.png"))
            # Every source system the runs read was observed by them, sensors off.
            observed = _graphql(
                webserver,
                '{ assetOrError(assetKey: {path: ["folders"]}) { ... on Asset '
                "{ assetObservations(limit: 1) { partition } } } }",
            )["assetOrError"]["assetObservations"]
            assert [o["partition"] for o in observed] == ["demo"]
            # The checks' own "Execute all": judges every partition, one result each.
            before = _all_runs(webserver)
            page.goto(f"{webserver}/assets/files/embeddings?view=checks")
            execute_all = page.get_by_role("button", name="Execute all").first
            execute_all.wait_for()
            page.wait_for_timeout(1000)
            execute_all.click()
            page.screenshot(path=str(tmp_path / "execute-all.png"))
            run_id = _wait_for_new_run(webserver, "files_ingest_job", before)
            assert ("index_integrity", "demo", True) in _check_evaluations(
                tmp_path / "dagster_home", run_id
            )
            # A check alone on one partition, as `rag check` runs it.
            run_id = _run_check_alone_on_a_partition(webserver, "index_integrity", "demo")
            assert _check_evaluations(tmp_path / "dagster_home", run_id) == [
                ("index_integrity", "demo", True)
            ]
            # Its figures are plotted per partition.
            page.goto(
                f"{webserver}/assets/files/embeddings?view=checks&checkDetail=index_integrity"
            )
            page.get_by_text("chunks [demo]").first.wait_for()
            page.wait_for_timeout(2000)
            page.screenshot(path=str(tmp_path / "check-per-partition.png"))
        finally:
            browser.close()
    names = (
        "asset-graph.png",
        "files_embeddings.png",
        "catalog-run.png",
        "check-per-partition.png",
    )
    for name in names:
        assert (tmp_path / name).stat().st_size > 10_000
    keep = os.environ.get("RAG_SCREENSHOT_DIR")
    if keep:  # how docs/images/ is made
        for name in names:
            shutil.copy(tmp_path / name, Path(keep) / name)


def test_the_quality_plot_and_its_check_after_two_materializations(
    webserver: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rag_pipeline.definitions import defs
    from rag_pipeline.orchestration.quality import NOT_WORSE, QUALITY_ASSET, QUALITY_JOB

    # The instance `rag dev` serves: the vocabulary on, then off (a drop the check names).
    with dg.DagsterInstance.from_config(str(tmp_path / "dagster_home")) as instance:
        for weight in ("0.75", "0"):
            monkeypatch.setenv("RAG_SEARCH_VOCABULARY_WEIGHT", weight)
            job = defs().resolve_job_def(QUALITY_JOB)
            assert job.execute_in_process(instance=instance).success
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS
        )
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1100})
            page.set_default_timeout(90_000)
            page.goto(f"{webserver}/assets/{QUALITY_ASSET}")
            skip = page.get_by_role("button", name="Skip")  # the first-visit newsletter dialog
            skip.wait_for()
            skip.click()
            # The metadata's plots: one per numeric key, a point per materialization.
            page.get_by_text("Plots", exact=True).first.click()
            title = page.get_by_text("ndcg@10", exact=True).first
            title.wait_for()
            page.get_by_text("latency_p95_ms", exact=True).first.wait_for()
            assert page.locator("canvas").count() >= 10
            title.scroll_into_view_if_needed()
            page.wait_for_timeout(3000)  # let the charts settle before the picture
            page.screenshot(path=str(tmp_path / "retrieval-quality.png"))
            # The check failed on the drop, naming the questions that got worse.
            page.goto(f"{webserver}/assets/{QUALITY_ASSET}?view=checks")
            page.get_by_text(NOT_WORSE).first.wait_for()
            page.get_by_text("nDCG@10 fell from").first.wait_for()
            page.get_by_text("worse: demo/").first.wait_for()
            page.screenshot(path=str(tmp_path / "retrieval-quality-check.png"))
        finally:
            browser.close()
    names = ("retrieval-quality.png", "retrieval-quality-check.png")
    for name in names:
        assert (tmp_path / name).stat().st_size > 10_000
    keep = os.environ.get("RAG_SCREENSHOT_DIR")
    if keep:  # how docs/images/ is made
        for name in names:
            shutil.copy(tmp_path / name, Path(keep) / name)
