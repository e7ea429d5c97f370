"""Each stack runs once per test session, under Pulumi mocks, from its real Pulumi.<stack>.yaml."""

from __future__ import annotations

import pytest

from infra.offline.program import OfflineRun, run_offline


@pytest.fixture(scope="session")
def dev_run() -> OfflineRun:
    return run_offline("dev")


@pytest.fixture(scope="session")
def prod_run() -> OfflineRun:
    return run_offline("prod")


@pytest.fixture(params=["dev", "prod"])
def stack_run(request: pytest.FixtureRequest) -> OfflineRun:
    return request.getfixturevalue(f"{request.param}_run")
