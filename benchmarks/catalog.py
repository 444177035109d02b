"""A partition materialized from the asset catalog, end to end, as the UI's Materialize does it.

    python benchmarks/catalog.py [--runs 3] [--port 3339]

In a fresh RAG_HOME (or the one set), it registers the bundled demo folder as partition
`demo`, starts `rag dev` (the Dagster webserver and daemon), and launches the catalog's
implicit asset job (`__ASSET_JOB`) on that partition through the webserver's GraphQL API,
the request the UI sends when a person picks the partition and clicks Materialize. The run
goes through the run queue, the daemon and the run launcher (a new process), like any run
launched from the UI. The first run ingests the folder; the next find it unchanged.

Per run it prints the seconds from the request to success (end to end), the part spent
before the run started (queue, launcher, process start and loading the definitions) and the
run's own execution, the executor its log names and whether it carries the run timeout tag.
"""

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml

REPO = Path(__file__).resolve().parents[1]
LOCATION = "rag_pipeline.definitions"
STAGES = ("raw", "markdown", "sanitized", "chunks", "embeddings")

LAUNCH = """
mutation Launch($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on RunConfigValidationInvalid { errors { message } }
    ... on InvalidSubsetError { message }
  }
}
"""
RUN = """
query Run($runId: ID!) {
  runOrError(runId: $runId) {
    ... on Run { status creationTime startTime endTime tags { key value } }
  }
}
"""
LOGS = """
query Logs($runId: ID!) {
  logsForRun(runId: $runId) {
    ... on EventConnection { events { __typename ... on MessageEvent { message } } }
  }
}
"""


def _graphql(url: str, query: str, **variables: object) -> dict:
    response = httpx.post(
        f"{url}/graphql", json={"query": query, "variables": variables}, timeout=60
    )
    response.raise_for_status()
    body = response.json()
    if body.get("errors"):
        raise RuntimeError(body["errors"])
    return body["data"]


def _wait_for_server(url: str, process: subprocess.Popen[bytes], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError("rag dev exited before it served")
        try:
            if httpx.get(f"{url}/server_info", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"rag dev did not serve {url} within {seconds:.0f} s")


def _launch(url: str, partition: str) -> str:
    params = {
        "selector": {
            "repositoryLocationName": LOCATION,
            "repositoryName": "__repository__",
            "jobName": "__ASSET_JOB",
            "assetSelection": [{"path": ["files", stage]} for stage in STAGES],
        },
        "mode": "default",
        "executionMetadata": {"tags": [{"key": "dagster/partition", "value": partition}]},
    }
    result = _graphql(url, LAUNCH, params=params)["launchRun"]
    if result["__typename"] != "LaunchRunSuccess":
        raise RuntimeError(f"launch refused: {result}")
    return result["run"]["runId"]


def _measure(url: str, partition: str) -> dict[str, object]:
    requested = time.time()
    run_id = _launch(url, partition)
    while True:
        run = _graphql(url, RUN, runId=run_id)["runOrError"]
        if run["status"] in {"SUCCESS", "FAILURE", "CANCELED"}:
            break
        time.sleep(0.2)
    done = time.time()
    messages = [
        event.get("message") or ""
        for event in _graphql(url, LOGS, runId=run_id)["logsForRun"]["events"]
    ]
    executor = next(
        (m for m in messages if "Executing steps" in m), "no executor message in the run's log"
    )
    tags = {tag["key"]: tag["value"] for tag in run["tags"]}
    return {
        "status": run["status"],
        "end_to_end": done - requested,
        "before_start": run["startTime"] - run["creationTime"],
        "execution": run["endTime"] - run["startTime"],
        "executor": executor,
        "max_runtime": tags.get("dagster/max_runtime"),
    }


def _executor(message: str) -> str:
    return "in process" if "in process" in message else message


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs to launch (the first ingests)")
    parser.add_argument("--port", type=int, default=3339)
    args = parser.parse_args()
    env = dict(os.environ)
    env.setdefault("RAG_HOME", tempfile.mkdtemp(prefix="rag-catalog-"))
    rag = [sys.executable, "-m", "rag_pipeline.cli"]
    subprocess.run([*rag, "folders", "add", "demo"], env=env, check=True, cwd=REPO)
    url = f"http://127.0.0.1:{args.port}"
    dev = subprocess.Popen(
        [*rag, "dev", "-h", "127.0.0.1", "-p", str(args.port)],
        env=env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _wait_for_server(url, dev, seconds=240)
        # A run without a `dagster/max_runtime` tag is stopped after the instance's default.
        instance = Path(env.get("DAGSTER_HOME") or Path(env["RAG_HOME"]) / "dagster")
        config = yaml.safe_load((instance / "dagster.yaml").read_text())
        default_timeout = f"(instance) {config['run_monitoring']['max_runtime_seconds']}"
        print(f"RAG_HOME={env['RAG_HOME']}  machine load {os.getloadavg()[0]:.2f}")
        table = [
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average"
            f" {os.getloadavg()[0]:.1f}, `python benchmarks/catalog.py --runs {args.runs}`:",
            "",
            "| run | end to end | queue, launch, load | execution | executor |",
            "| --- | --- | --- | --- | --- |",
        ]
        for number in range(1, args.runs + 1):
            figures = _measure(url, "demo")
            kind = "first" if number == 1 else "unchanged"
            table.append(
                f"| {number} ({kind}) | {figures['end_to_end']:.1f} s |"
                f" {figures['before_start']:.1f} s | {figures['execution']:.1f} s |"
                f" {_executor(str(figures['executor']))} |"
            )
            print(
                f"run {number} ({kind}): {figures['status']} in {figures['end_to_end']:.1f} s end"
                f" to end = {figures['before_start']:.1f} s queue, launch and load +"
                f" {figures['execution']:.1f} s execution; {figures['executor']};"
                f" run timeout {figures['max_runtime'] or default_timeout} s"
            )
        print("\n".join(["", *table]))
    finally:
        os.killpg(dev.pid, signal.SIGTERM)
        try:
            dev.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(dev.pid, signal.SIGKILL)
        subprocess.run([*rag, "stop"], env=env, cwd=REPO, capture_output=True)


if __name__ == "__main__":
    main()
