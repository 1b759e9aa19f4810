"""The package's bytecode compiled before anything is timed, as `pip install` leaves an installed
package.

A process that starts `lineage` compiles every module it imports whose bytecode is missing or stale;
with `PYTHONDONTWRITEBYTECODE=1` (set on some machines, this one included) an editable install never
keeps it, so every process pays 20-30 ms that no user of an installed copy pays and that MLflow,
installed by pip, never pays in the peer benchmark. Compiling writes the bytecode whatever that
variable says; reading it is allowed.
"""

from __future__ import annotations

import compileall
from pathlib import Path

import rollout_lineage


def compile_package() -> None:
    # The package folder links to the layer folders at the top level (domain/, adapters/, ...):
    # compile those.
    root = Path(rollout_lineage.__file__).resolve().parent
    for folder in (root, *(p.resolve() for p in root.iterdir() if p.is_symlink())):
        compileall.compile_dir(folder, quiet=1)
