"""`rag validate` and `rag dev`: is the installation ready, and the Dagster UI with its daemon."""

import os
import shutil
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from rag_pipeline.cli.common import cli_settings, errors_as_messages
from rag_pipeline.settings import Settings

if TYPE_CHECKING:
    from rag_pipeline.operations.validation import CheckResult


def register(main: click.Group) -> None:
    """Add the commands of this module to `rag`."""
    main.add_command(validate)
    main.add_command(dev)


@click.command()
def validate() -> None:
    """Check both databases, the wiki, the schema, the model and the extensions.

    Prints one PASS or FAIL line per check and exits with status 1 if any failed.
    """
    from rag_pipeline.operations.validation import validate as run_checks

    settings = cli_settings()
    results = [*run_checks(settings), _dagster_storage(settings)]
    width = max(len(result.name) for result in results)
    for result in results:
        verdict = (
            click.style("PASS", fg="green") if result.passed else click.style("FAIL", fg="red")
        )
        click.echo(f"{verdict}  {result.name:<{width}}  {result.detail}")
    failed = [result.name for result in results if not result.passed]
    if failed:
        click.echo(f"{len(failed)} of {len(results)} checks failed: {', '.join(failed)}", err=True)
        sys.exit(1)
    click.echo(f"all {len(results)} checks passed")


def _dagster_storage(settings: Settings) -> "CheckResult":
    """The Dagster instance opens and answers (SQLite, or PostgreSQL with DAGSTER_PG_*)."""
    from rag_pipeline.operations.validation import CheckResult
    from rag_pipeline.orchestration.instance import dagster_instance, storage_kind

    kind = "SQLite" if storage_kind() == "sqlite" else "PostgreSQL (DAGSTER_PG_*)"
    try:
        instance = dagster_instance(settings)
        runs = instance.get_runs_count()
    except Exception as exc:  # a verdict, not a traceback
        return CheckResult("dagster storage", False, f"{kind}: {type(exc).__name__}: {exc}")
    return CheckResult("dagster storage", True, f"{kind} in {instance.root_directory}, {runs} runs")


# `-h` belongs to dg here (`rag dev -h 127.0.0.1` is the host), so only `--help` is ours.
@click.command(
    context_settings={"ignore_unknown_options": True, "help_option_names": ["--help"]},
)
@click.argument("dagster_args", nargs=-1, type=click.UNPROCESSED)
def dev(dagster_args: tuple[str, ...]) -> None:
    """The Dagster UI and daemon on this code location (`dg dev`).

    Every argument goes to `dg dev`: `rag dev -h 127.0.0.1 -p 3000`. The instance is
    the one `rag ingest` uses (DAGSTER_HOME, else RAG_HOME/dagster), so its runs show up;
    the embedded database is started first. Schedules and sensors that poll a source are
    stopped until you start them (RAG_AUTOMATION=true starts the nightly schedules and the
    automation sensor).
    """
    from rag_pipeline.orchestration.instance import dagster_home
    from rag_pipeline.store.runtime import ready_conninfo

    settings = cli_settings()
    with errors_as_messages():
        ready_conninfo(settings)
        os.environ["DAGSTER_HOME"] = str(dagster_home(settings))
    # `dg dev` (which supersedes `dagster dev`) with the module: no project file needed, so it
    # runs the same from a checkout and from an installed wheel.
    command = [_dg_executable(), "dev", "-m", "rag_pipeline.definitions"]
    # Ignored signals survive exec. `dg dev` maps SIGTERM to SIGINT's handler, so started
    # in the background by a script (SIGINT ignored) neither signal could stop it; and an
    # ignored SIGTERM passes to the webserver, the daemon and their runs' `tail -F` output
    # mirrors, which Dagster stops with SIGTERM. Give `dg dev` both at their default.
    for signum in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(signum) is signal.SIG_IGN:
            signal.signal(signum, signal.SIG_DFL)
    os.execv(command[0], [*command, *dagster_args])


def _dg_executable() -> str:
    """The `dg` script installed beside this interpreter (a venv's bin), else the one on PATH."""
    beside = Path(sys.executable).parent / "dg"
    if beside.is_file():
        return str(beside)
    found = shutil.which("dg")
    if found is None:
        raise click.ClickException("`dg` (dagster-dg-cli) is not installed: reinstall rag_pipeline")
    return found
