"""The Dagster side of the house: the asset chain every source shares, its executor, the
Dagster instance `rag` and `dagster` share, and the list of sources."""
