"""Example rlaudit plugin: ``PolyakDQN`` (an SB3 algorithm) and ``HillClimbing`` (a learner)."""
