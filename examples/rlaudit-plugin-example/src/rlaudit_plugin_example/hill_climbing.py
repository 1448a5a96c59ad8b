"""A non-SB3 plugin algorithm following rlaudit's learner protocol (plain numpy, no torch)."""

from __future__ import annotations

import numpy as np


class HillClimbing:
    """Linear policy improved by hill climbing with adaptive noise (discrete actions).

    Learner protocol: explicit keyword hyperparameters, ``__init__`` only stores them, all randomness
    from ``seed``, ``learn(total_timesteps, callback)`` calls ``callback(steps_so_far)`` after every
    environment step and stops when it returns ``False``, ``predict(obs, deterministic)`` acts on one
    observation, ``get_params()`` returns the hyperparameters.

    Args:
        env: a gymnasium env with a flat Box observation space and Discrete actions.
        seed: seeds the weights, the perturbations and the env's resets.
        noise_scale: initial standard deviation of the weight perturbations.
        episodes_per_candidate: episodes that score one candidate (mean return).
    """

    rlaudit_action_spaces = ("discrete",)

    def __init__(self, env, *, seed: int, noise_scale: float = 0.5, episodes_per_candidate: int = 1):
        self.env = env
        self.seed = seed
        self.noise_scale = noise_scale
        self.episodes_per_candidate = episodes_per_candidate

    def _act(self, weights: np.ndarray, obs) -> int:
        return int(np.argmax(np.asarray(obs, dtype=np.float64).ravel() @ weights))

    def learn(self, total_timesteps: int, callback=None) -> "HillClimbing":
        if self.noise_scale <= 0 or self.episodes_per_candidate < 1:
            raise ValueError("noise_scale must be > 0 and episodes_per_candidate >= 1")
        rng = np.random.default_rng(self.seed)
        n_obs = int(np.prod(self.env.observation_space.shape))
        n_actions = int(self.env.action_space.n)
        self.weights_ = rng.normal(0.0, 0.1, (n_obs, n_actions))
        best, scale, steps = -np.inf, self.noise_scale, 0
        while steps < total_timesteps:
            candidate = self.weights_ + scale * rng.normal(size=self.weights_.shape) if np.isfinite(best) else self.weights_
            returns = []
            for _ in range(self.episodes_per_candidate):
                obs, _ = self.env.reset(seed=int(rng.integers(2**31 - 1)))
                total, done = 0.0, False
                while not done:
                    obs, reward, terminated, truncated, _ = self.env.step(self._act(candidate, obs))
                    total += float(reward)
                    done = terminated or truncated
                    steps += 1
                    if callback is not None and callback(steps) is False:
                        return self
                    if steps >= total_timesteps:
                        return self
                returns.append(total)
            score = float(np.mean(returns))
            if score >= best:
                self.weights_, best, scale = candidate, score, max(scale / 2, 1e-3)
            else:
                scale = min(scale * 2, 2.0)
        return self

    def predict(self, obs, deterministic: bool = True) -> int:
        weights = getattr(self, "weights_", None)
        if weights is None:
            raise RuntimeError("call learn() before predict()")
        return self._act(weights, obs)

    def get_params(self) -> dict:
        return {"noise_scale": self.noise_scale, "episodes_per_candidate": self.episodes_per_candidate}
