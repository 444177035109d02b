"""Partitions of the `files` source: one per folder (`demo` is the bundled corpus)."""

import dagster as dg

files_folders = dg.DynamicPartitionsDefinition(name="files_folders")
