"""benchflow's staged (branching) run directories: tree, stages, forks, custody and ablation
files."""
