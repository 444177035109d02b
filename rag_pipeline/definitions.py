"""The code location: everything under `defs/` is autoloaded.

Loaded from the installed package alone: `dg.load_from_defs_folder` would look for the
project's pyproject.toml at run time, which a wheel installed outside a checkout does not
have. The tree it builds is the same one, rooted at the package.
"""

import warnings
from pathlib import Path

import dagster as dg

import rag_pipeline.defs

# The one name of the code location: what `-m rag_pipeline.definitions` gives by default, so
# `rag dev`, `dagster job execute -m`, `dg launch -m` and the clone's `dg` all agree.
CODE_LOCATION_NAME = "rag_pipeline.definitions"


@dg.definitions
def defs() -> dg.Definitions:
    """All assets, checks, jobs, schedules, sensors and resources of rag_pipeline."""
    tree = dg.ComponentTree(
        defs_module=rag_pipeline.defs,
        project_root=Path(__file__).parent,
        code_location_name=CODE_LOCATION_NAME,
    )
    with warnings.catch_warnings():
        # The autoloader's own helpers are marked preview; load_from_defs_folder silences
        # them the same way.
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return tree.build_defs()
