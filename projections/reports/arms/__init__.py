"""Comparing arms: `lineage arms` and its statistics, benchflow's ablation attribution, and
the charts `lineage serve` draws from the same numbers.
"""
