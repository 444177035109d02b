"""How the Application Dictionary's documents rank (found by `search/plugins.py`)."""

import re

from rag_pipeline.core.source_rules import SourceRanking, TitleWeight

# The import windows and processes ("Import Business Partner", "Importar Activos Fijos") repeat
# their target's name and every column of it, so they outrank the window a question means
# ("activos fijos" -> Asset) unless it asks to import (RAG_SEARCH_IMPORT_WEIGHT).
IMPORT_WORDS = re.compile(
    # not "sin importar si ..." / "no importa": regardless of
    r"(?<!sin )(?<!no )\b(import|upload|load|csv|excel|spreadsheet|xls|bulk|migrat|file|"
    r"carg|subir|sub[eo]\b|plan[oa]s?\b|archivo|masiv|hoja de calculo)"
)
# A process is weighed below a window (RAG_SEARCH_ENTITY_WEIGHTS: "where do I enter the vendor
# invoice" means the window, not a vendor invoice report) unless the query asks to generate,
# run, calculate or report, or for work done automatically or in a batch.
PROCESS_WORDS = re.compile(
    r"\b(generat|gener(?:a|ar|o|e|en|an|amos|ando)\b|run\b|ejecut|(?<!hoja de )calcul|report|"
    r"informe|automatic|batch)"
)

RANKINGS = (
    SourceRanking(
        source_type="ad_metadata",  # ad.SOURCE_TYPE (not imported: a cold search stays light)
        whole_documents=True,
        title_weights=(
            TitleWeight(
                entity_types=("window", "process"),
                # "Import(ed) ...", "Importar ...", "Importación ...", not "Importe" (amount)
                title_pattern=r"^import(?!es?\M|an)",
                knob="import_weight",
                wanted_when=IMPORT_WORDS,
            ),
        ),
        wanted_entities={"process": PROCESS_WORDS},
    ),
)
