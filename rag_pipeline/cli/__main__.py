"""`python -m rag_pipeline.cli` runs `rag`."""

from rag_pipeline.cli import main

main()
