"""The settings of the `retrieval_quality` asset: which labelled sets it scores, when it runs,
and when its check `retrieval_quality_not_worse` fails and with what severity."""

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field
from pydantic_settings import BaseSettings


class QualitySettings(BaseSettings):
    """Labelled sets, the automatic run's period, and the regression check's thresholds."""

    quality_sets_dir: Path | None = Field(
        default=None,
        description="Folder of labelled sets the retrieval_quality asset scores (each *.jsonl "
        "file a set, the format `rag eval --set` reads), besides the bundled demo set.",
    )
    quality_bundled_set: bool = Field(
        default=True,
        description="Score the bundled demo set too (its questions name the demo documents; "
        "those an index does not hold are reported, not scored).",
    )
    quality_period_cron: str = Field(
        default="0 * * * *",
        description="retrieval_quality runs by itself at most once per tick of this cron (in "
        "RAG_TIMEZONE), after an embeddings partition it reads was updated.",
    )
    quality_max_drop: Annotated[float, Field(ge=0, le=1)] = Field(
        default=0.02,
        description="retrieval_quality_not_worse fails when nDCG@10 falls more than this below "
        "the previous materialization's.",
    )
    quality_floor: Annotated[float, Field(ge=0, le=1)] | None = Field(
        default=None,
        description="retrieval_quality_not_worse also fails when nDCG@10 is below this.",
    )
    quality_severity: Literal["warn", "error"] = Field(
        default="warn",
        description="Severity of a failed retrieval_quality_not_worse; error also blocks: the "
        "run fails (`dagster job execute` exits non-zero) and nothing downstream runs.",
    )
