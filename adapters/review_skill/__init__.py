"""benchflow's experiment-review skill, reading one rollout: its files parsed once
(`review_input`), the validator's artifact contract, the reward-hacking scan, the skill-catalog
recovery and capability attribution. What they find is recorded at import; the verdict is made
from the log by `projections/reports/audit/`.
"""
