"""Every shared resource and IO manager, registered once, and the executor of every run."""

import dagster as dg

from rag_pipeline.io_managers.pgvector import PgVectorIOManager
from rag_pipeline.io_managers.stage import StageIOManager
from rag_pipeline.orchestration.executors import job_executor
from rag_pipeline.resources.embedder import EmbedderResource
from rag_pipeline.resources.vectordb import VectorDBResource
from rag_pipeline.settings import load_settings


@dg.definitions
def resources() -> dg.Definitions:
    """The vector database, the embedding model and the IO managers that write to Postgres.

    The model and chunk settings show their effective defaults (from `RAG_*` when the code
    location loaded); the database URL is read from `RAG_VECTORDB_*` when a run starts, so the
    UI never shows a secret. The executor (`RAG_EXECUTOR`) is the code location's: every run
    uses it, the project's jobs as well as Dagster's implicit asset job (a materialization
    launched from the catalog), automation runs and backfills.
    """
    settings = load_settings()
    vectordb = VectorDBResource(home=str(settings.home))
    return dg.Definitions(
        resources={
            "vectordb": vectordb,
            "embedder": EmbedderResource.from_settings(settings),
            "stage_io_manager": StageIOManager(vectordb=vectordb),
            "pgvector_io_manager": PgVectorIOManager(vectordb=vectordb),
        },
        executor=job_executor(settings),
    )
