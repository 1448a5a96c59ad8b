"""A test plugin for tests/test_ray.py: PPO that raises when trained with seed 1."""

from stable_baselines3 import PPO


class FlakyPPO(PPO):
    """PPO that raises at training time for seed 1 (exercises the Ray executor's failure path)."""

    def learn(self, *args, **kwargs):
        if self.seed == 1:
            raise RuntimeError("FlakyPPO: deliberate failure for seed 1")
        return super().learn(*args, **kwargs)
