"""Exports of the log in other tools' formats: benchflow's own files (`tree.json`,
`stage_snapshots.json`, `ablation.json`), OpenLineage events and Parquet tables.
"""
