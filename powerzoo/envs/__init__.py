"""Generic adapters from tasks to Gymnasium / vector envs, and wrappers."""
