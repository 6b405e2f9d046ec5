"""The Stable-Baselines3 wing: the SB3 trainer, its callbacks, the native ``VecEnv`` for SB3, the
SB3 policies behind the benchmark interface and the SB3 multi-agent loops."""
