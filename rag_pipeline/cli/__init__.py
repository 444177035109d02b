"""The `rag` command: a thin layer over the same code the Dagster assets run.

One module per command group, each with a `register(main)`; what they share is in `common`.
"""

import click

from rag_pipeline.cli import ask, checks, database, folders, ingest, ops, search, show


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rag_pipeline")
def main() -> None:
    """rag_pipeline: a fresh hybrid search index of iDempiere knowledge in PostgreSQL."""


for _group in (database, ingest, checks, folders, show, search, ask, ops):
    _group.register(main)
