import warnings

import pytest


@pytest.fixture(autouse=True)
def _quiet_gymnasium_checker():
    # check_env warns about render modes when an env has no registry spec; not a failure.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*render modes.*")
        warnings.filterwarnings("ignore", message=".*different from the unwrapped version.*")
        yield
