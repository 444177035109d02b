"""The `rag` command: a thin layer over the same code the Dagster assets run.

One module per command group, each with a `register(main)`; what they share is in `common`.
"""

import gc

# The commands' modules (click, pydantic, the settings) make objects that live as long as the
# process and hold no garbage, which every later full collection traversed again. None is
# collected while they import, then they are frozen, out of every collection's way
# (docs/search-speed.md, "Cold `rag search`").
gc.disable()
try:
    import click

    from rag_pipeline.cli import ask, checks, database, folders, ingest, ops, search, show
finally:
    gc.freeze()
    gc.enable()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rag_pipeline")
def main() -> None:
    """rag_pipeline: a fresh hybrid search index of iDempiere knowledge in PostgreSQL."""


for _group in (database, ingest, checks, folders, show, search, ask, ops):
    _group.register(main)
