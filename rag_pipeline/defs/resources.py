"""Every resource and IO manager, registered once."""

import dagster as dg

from rag_pipeline.io_managers.pgvector import PgVectorIOManager
from rag_pipeline.io_managers.stage import StageIOManager
from rag_pipeline.resources.embedder import EmbedderResource
from rag_pipeline.resources.vectordb import VectorDBResource


@dg.definitions
def resources() -> dg.Definitions:
    """The vector database, the embedding model and the IO managers that write to Postgres.

    The resources take their settings from the `RAG_*` environment variables when a run starts
    (see `rag_pipeline.settings`), not here: an unset variable means "use the default", which
    `dg.EnvVar` cannot express for optional values.
    """
    vectordb = VectorDBResource()
    return dg.Definitions(
        resources={
            "vectordb": vectordb,
            "embedder": EmbedderResource(),
            "stage_io_manager": StageIOManager(vectordb=vectordb),
            "pgvector_io_manager": PgVectorIOManager(vectordb=vectordb),
        }
    )
