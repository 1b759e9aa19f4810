"""`python -m rollout_lineage.cli`: the same as the `lineage` console script."""

from .main import main

main()
