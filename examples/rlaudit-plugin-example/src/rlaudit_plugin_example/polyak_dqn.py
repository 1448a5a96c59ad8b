"""An SB3-based plugin algorithm: any ``BaseAlgorithm`` subclass works as it is."""

from stable_baselines3 import DQN


class PolyakDQN(DQN):
    """DQN with soft (Polyak) target-network updates after every environment step."""

    # Optional metadata read by rlaudit's registry.
    rlaudit_action_spaces = ("discrete",)
    rlaudit_defaults = {"tau": 0.005, "target_update_interval": 1}
