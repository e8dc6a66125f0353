import os
from pathlib import Path

import pytest

# the served-dashboard fixtures (server, browser, page) for every browser test module
pytest_plugins = ["tests.browser_harness"]

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
ENRON_TARBALL = SHARED_DATA / "enron_sent_subset.tar.gz"
ARTIFACTS = REPO / "artifacts"


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", help="also run paper-scale (slow) tests")


def pytest_collection_modifyitems(config, items):
    # Paper-scale runs are not part of the default suite: deselect them (they
    # are reported as deselected, never counted as passed or skipped).
    if config.getoption("--runslow"):
        return
    slow = [item for item in items if "slow" in item.keywords]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if "slow" not in item.keywords]


@pytest.fixture(scope="session")
def enron_tarball():
    """The shared real Enron subset. Required in CI; elsewhere skip with a hint."""
    if ENRON_TARBALL.is_file():
        return ENRON_TARBALL
    message = (
        f"{ENRON_TARBALL} is missing: put the shared data beside the repo "
        "(../shared/data/enron_sent_subset.tar.gz) or run `lpviz fetch-enron`"
    )
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def artifacts_dir():
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="module")
def client(request):
    """A Dask LocalCluster and its Client for the module: ``CLUSTER_WORKERS`` workers (the module's
    constant, default 2) of one thread each, in this process (they share its compiled kernels)."""
    pytest.importorskip("distributed")
    from distributed import Client, LocalCluster

    n_workers = getattr(request.module, "CLUSTER_WORKERS", 2)
    with (
        LocalCluster(n_workers=n_workers, processes=False, threads_per_worker=1, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        yield client
