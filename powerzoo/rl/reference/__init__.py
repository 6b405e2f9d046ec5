"""Reference baselines: learners that use what the task already knows.

Each is an algorithm name of :func:`powerzoo.rl.Trainer` and of campaigns
(:data:`powerzoo.rl.algorithms.REFERENCE_ALGORITHMS`):

- ``PPO-RESIDUAL``, ``SAC-RESIDUAL``, ``MAPPO-RESIDUAL``: a residual on the task's rule,
  ``clip(rule(s) + scale * half_range * pi(s))``, with ``pi``'s mean starting at 0;
- ``PPO-SAFE``, ``MAPPO-SAFE``: the learner's action projected onto the bounds the task declares
  for the step (:func:`~powerzoo.rl.reference.layers.step_bounds`);
- ``BC-PPO``: PPO started from the oracle's actions cloned from an offline dataset.

Modules: :mod:`.layers` (the residual and the projection on batches of joint actions),
:mod:`.wrappers` (envs behind a layer), :mod:`.bc` (behaviour cloning), :mod:`.sb3_trainer` and
:mod:`.mappo_trainer` (the trainers). Importing this package imports neither torch nor SB3.
"""
