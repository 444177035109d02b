"""The settings of running rag_pipeline like production: schedules, executors, limits, lineage.

`OperationsSettings` holds the nightly schedule and executor, the bounds of the HTTP clients,
the agent server's token and session caps, document history, and what Dagster's freshness
policies and concurrency pools enforce; `rag_pipeline.settings.Settings` combines it with the
other groups.
"""

from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings

from rag_pipeline.settings.parsers import parse_freshness_hours


class OperationsSettings(BaseSettings):
    """Schedules, executors, client and server limits, history, freshness and pools."""

    # Running it like production (rag_pipeline/defs/schedules.py, executors.py).
    nightly_cron: str = Field(
        default="30 2 * * *", description="Cron of each source's nightly full reconcile."
    )
    timezone: str = Field(default="UTC", description="IANA time zone of the nightly cron.")
    automation: bool = Field(
        default=False,
        description="Start the nightly schedules and the automation sensor with the daemon "
        "(off in local dev: turn them on in the UI, or set this in production).",
    )
    executor: Literal["in_process", "multiprocess", "celery"] = Field(
        default="in_process",
        description="Executor of the jobs: in_process (default), multiprocess, celery.",
    )
    celery_broker: str = Field(
        default="pyamqp://guest:guest@127.0.0.1:5672//",
        description="Celery broker URL (RabbitMQ or redis://) when RAG_EXECUTOR=celery.",
    )
    celery_backend: str = Field(
        default="rpc://", description="Celery result backend when RAG_EXECUTOR=celery."
    )
    run_timeout_seconds: Annotated[int, Field(ge=60)] = Field(
        default=4 * 3600,
        description="A run still going after this long is stopped (dagster/max_runtime).",
    )

    # HTTP clients bounded (issue 38): the wiki client and the LLM client.
    wiki_max_bytes: Annotated[int, Field(ge=1024, le=1024**3)] = Field(
        default=2 * 1024 * 1024,
        description="Largest wiki page indexed, in bytes of rendered HTML (or an export's "
        "wikitext); larger pages are recorded as failed. API responses are cut at 4 times "
        "this plus 1 MiB.",
    )
    wiki_max_listing_requests: Annotated[int, Field(ge=1, le=1_000_000)] = Field(
        default=1000,
        description="Requests one wiki listing (a category, a revision batch, a change poll) "
        "may make following `continue` (500 entries each) before it fails.",
    )
    wiki_listing_timeout_seconds: Annotated[float, Field(gt=0, le=86_400)] = Field(
        default=900.0, description="Seconds one wiki listing may take, retries included."
    )
    wiki_fetch_seconds: Annotated[float, Field(gt=0, le=86_400)] = Field(
        default=300.0,
        description="Seconds one wiki request (a page's fetch) may take, retries included; "
        "a page past it fails alone.",
    )
    llm_deadline_seconds: Annotated[float, Field(gt=0, le=86_400)] = Field(
        default=300.0,
        description="Seconds one LLM answer may take in all, retries and waits included; "
        "keep-alive bytes do not extend it (RAG_LLM_TIMEOUT_SECONDS is the longest wait "
        "for the next piece of answer text).",
    )

    # The agent server and search connections, hardened (issue 38: `rag mcp --http` token and
    # session caps, bounded statements, reconnection).
    mcp_token: SecretStr | None = Field(
        default=None,
        description="The bearer token `rag mcp --http` requires (at least 16 characters); "
        "unset = a random one generated into RAG_HOME/mcp-token (mode 0600) on first use.",
    )
    mcp_max_sessions: Annotated[int, Field(ge=1, le=10_000)] = Field(
        default=64,
        description="Open sessions of `rag mcp --http` in total; at the cap a new session "
        "closes the one idle longest (503 only while every session has a request running).",
    )
    mcp_max_sessions_per_client: Annotated[int, Field(ge=1, le=10_000)] = Field(
        default=8,
        description="Open sessions of one client (its address and the name it gives at "
        "initialize); past it the client's own idle-longest session is closed.",
    )
    mcp_session_idle_seconds: Annotated[float, Field(ge=5, le=86_400)] = Field(
        default=300.0,
        description="A session of `rag mcp --http` with no request for this long is closed.",
    )
    mcp_header_seconds: Annotated[float, Field(gt=0, le=3600)] = Field(
        default=10.0,
        description="Seconds a connection to `rag mcp --http` may take to send its request "
        "headers (from its opening, or its previous answer); its body gets 3 times as long.",
    )
    mcp_max_connections: Annotated[int, Field(ge=2, le=100_000)] = Field(
        default=256,
        description="Open connections to `rag mcp --http` in total (half of them per client "
        "address); a new one past a cap closes the one waiting longest for its headers.",
    )
    search_statement_timeout_ms: Annotated[int, Field(ge=100, le=3_600_000)] = Field(
        default=5000,
        description="Milliseconds a statement of a search or agent tool may run before the "
        "server cancels it (statement_timeout of every search connection).",
    )

    @field_validator("mcp_token")
    @classmethod
    def _mcp_token_is_long(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value().strip():
            return None
        token = value.get_secret_value().strip()
        if len(token) < 16 or any(c.isspace() or not c.isprintable() for c in token):
            raise ValueError("must be at least 16 printable characters without spaces")
        return SecretStr(token)

    # Document lineage and history (issue 35: `rag show`, rag.document_versions).
    history_versions: Annotated[int, Field(ge=0, le=100)] = Field(
        default=3,
        description="Earlier versions of each document kept besides the "
        "current one (0 to 100; 0 keeps only the current version's lineage); the oldest is "
        "pruned when a document changes.",
    )
    dagster_ui_url: str | None = Field(
        default=None,
        description="Base URL of the Dagster webserver (e.g. "
        "http://127.0.0.1:3000); `rag show` then prints each run's URL.",
    )

    @field_validator("dagster_ui_url")
    @classmethod
    def _ui_url_is_http(cls, value: str | None) -> str | None:
        if value and not value.startswith(("http://", "https://")):
            raise ValueError("RAG_DAGSTER_UI_URL must start with http:// or https://")
        return value.rstrip("/") if value else None

    # Orchestrated through Dagster (issue 34: orchestration/checks.py, executors.py).
    freshness_hours: str = Field(
        default="26",
        description="Hours within which each source's index must have synced, else Dagster's "
        "freshness policy marks it failing: one number for every source, then `source=hours` "
        "exceptions, e.g. `26,wiki=6` (the nightly reconcile plus two hours by default).",
    )
    ad_entity_types: str = Field(
        default="table,window,tab,field,process",
        description="Entity types of the Application Dictionary indexed, comma-separated "
        "(CI may index `table` alone).",
    )
    embedding_concurrency: Annotated[int, Field(ge=1, le=64)] | None = Field(
        default=None,
        description="Steps running at once in each concurrency pool of the Dagster instance "
        "(the `embedding` pool of every embeddings step, each source's `<source>_requests` "
        "pool); unset: no limit, so a killed run never leaves a slot taken on a laptop.",
    )

    @field_validator("freshness_hours")
    @classmethod
    def _freshness_hours_parse(cls, value: str) -> str:
        try:
            parse_freshness_hours(value)
        except ValueError as exc:
            raise ValueError(str(exc)) from None
        return value

    def freshness_windows(self) -> dict[str, float]:
        """Source → freshness window in hours; the key "" holds the default."""
        return parse_freshness_hours(self.freshness_hours)
