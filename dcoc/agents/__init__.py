"""DCOC's agents: multi-agent PPO (CTDE) and the knob-to-agent split."""
from dcoc.agents.clustering import MODES, cluster_knobs, fixed_groups, make_groups
from dcoc.agents.mappo import MAPPO, MAPPOConfig

__all__ = ["MAPPO", "MAPPOConfig", "MODES", "cluster_knobs", "fixed_groups", "make_groups"]
