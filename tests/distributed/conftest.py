"""The Dask clusters the distributed tests run on, declared once.

``client``: two worker processes (one thread each) on 127.0.0.1 and a client, for one test module: the
real separate processes the issue asks for (faults kill and stop them). ``threaded_client``: two
workers as threads of the test process, for modules that only check values (they start faster);
such a module serves it as its ``client``. Module-scoped, as each module had its own: a module that
kills workers leaves nothing behind for the next one.
"""
from __future__ import annotations

import pytest

try:
    from dask.distributed import Client, LocalCluster
except ImportError:  # (without the distributed extra the test modules skip themselves)
    Client = LocalCluster = None


def _cluster(processes: bool):
    with LocalCluster(n_workers=2, processes=processes, threads_per_worker=1, dashboard_address=None) as cluster, \
            Client(cluster) as c:
        yield c


@pytest.fixture(scope="module")
def client():
    yield from _cluster(processes=True)


@pytest.fixture(scope="module")
def threaded_client():
    yield from _cluster(processes=False)
