"""The groups of settings `rag_pipeline.settings.Settings` is made of; import from there."""
