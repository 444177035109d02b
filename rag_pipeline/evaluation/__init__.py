"""Retrieval quality: the metrics that `rag eval`, the benchmarks and Dagster share.

It uses search as any caller does; `rag_pipeline.search` never imports it.
"""
