"""How often the executor's upkeep runs: retention (``pruner``), index upkeep (``reindexer``).

The defaults live here, apart from the two modules, so that an executor's
start (its command-line options, the claim loop) imports neither: the claim
loop makes its pruner at the first pruning step and starts the index upkeep
after its first claim (``claim_loop``), so neither is on the path to it.
"""

from __future__ import annotations

DEFAULT_PRUNE_INTERVAL = 60.0
DEFAULT_REINDEX_INTERVAL = 3600.0
DEFAULT_FIRST_CHECK = 300.0  # after start: a fleet's restart is not a burst of checks
