"""What every entry point needs at run time, without Dagster: the migrated database, the loaded
model, and the checks behind `rag validate`."""
