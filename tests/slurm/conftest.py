"""Fixtures for tests on the real local Slurm cluster (slurm/local_cluster.sh up; CI: make slurm-up)."""

from __future__ import annotations

import pytest

from tests.slurm.cluster import slurm_problem


@pytest.fixture(scope="session")
def slurm_up() -> None:
    problem = slurm_problem()
    if problem:
        pytest.skip(problem)
