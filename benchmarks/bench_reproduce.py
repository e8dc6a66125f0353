"""What Dask costs and buys a reproduction grid, against running the same tasks in a plain loop.

Runs one experiment's grid (default: Figure 1 at the ``tiny`` preset, 14
short chains) three ways on the same machine in one run, each into its own
folder:

- a plain loop in this process (:func:`lpviz.reproduce.grid.run_tasks` with
  ``scheduler="serial"``): the reference;
- a LocalCluster of W worker processes x 1 kernel thread (cluster start-up
  timed apart);
- the same cluster, resumed with every task done (what ``--resume`` costs
  when there is nothing left to do).

Figures: wall-clock of each, seconds of work per task (median; summed in
the loop and on the workers), per-task overhead of Dask = (cluster wall-clock
x W - sum of the task seconds measured on the workers) / tasks,
the speed-up over the loop, and whether the results are equal (they must
be: tasks are pure functions of their parameters). Target: the speed-up
approaches W once tasks last seconds (the quick and paper presets); for the
tiny preset the per-task overhead (tens of ms) is what is measured.

    python benchmarks/bench_reproduce.py                    # fig1 tiny, 2 workers
    python benchmarks/bench_reproduce.py --name fig3 --preset quick --workers 2
    python benchmarks/bench_reproduce.py --tiny             # the tiny preset (the default), for the test suite
"""

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from lpviz.reproduce import get
from lpviz.reproduce.grid import ResultStore, local_cluster, run_tasks


def _same(folder_a, folder_b):
    a, b = ResultStore(folder_a), ResultStore(folder_b)
    if a.ids() != b.ids():
        return False
    for task_id in a.ids():
        (record_a, arrays_a), (record_b, arrays_b) = a.read(task_id), b.read(task_id)
        if record_a["scores"].get("mae") != record_b["scores"].get("mae"):
            return False
        if not all(
            np.array_equal(arrays_a[k], arrays_b[k], equal_nan=arrays_a[k].dtype.kind == "f")
            for k in arrays_a
            if k != "iteration_seconds"
        ):
            return False
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="fig1")
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--tiny", action="store_true", help="the tiny preset, whatever --preset says (the default)")
    args = parser.parse_args()
    if args.tiny:
        args.preset = "tiny"

    from distributed import Client

    experiment = get(args.name)
    tasks = experiment.tasks(args.preset)
    print(
        f"{args.name} ({args.preset}): {len(tasks)} tasks; {os.cpu_count()} cores; load average "
        f"{os.getloadavg()[0]:.1f}"
    )
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        experiment.prepare(experiment.settings(args.preset))
        run_tasks(tasks[:1], ResultStore(folder / "warm"), experiment.task_function, scheduler="serial")  # compile

        start = time.perf_counter()
        serial = run_tasks(tasks, ResultStore(folder / "serial"), experiment.task_function, scheduler="serial")
        serial_seconds = time.perf_counter() - start
        work = [ResultStore(folder / "serial").read_record(t.id)["seconds_total"] for t in tasks]

        start = time.perf_counter()
        cluster = local_cluster(args.workers, threads=1)
        client = Client(cluster)
        startup = time.perf_counter() - start
        try:
            run_tasks(
                tasks[: args.workers], ResultStore(folder / "warm-cluster"), experiment.task_function, scheduler=client
            )  # each worker loads the compiled kernels once
            start = time.perf_counter()
            dask = run_tasks(tasks, ResultStore(folder / "dask"), experiment.task_function, scheduler=client)
            dask_seconds = time.perf_counter() - start
            start = time.perf_counter()
            resumed = run_tasks(tasks, ResultStore(folder / "dask"), experiment.task_function, scheduler=client)
            resume_seconds = time.perf_counter() - start
        finally:
            client.close()
            cluster.close()
        worker_work = [ResultStore(folder / "dask").read_record(t.id)["seconds_total"] for t in tasks]
        # time the workers spent outside the tasks (scheduling, transfer, writing results)
        overhead = (dask_seconds * args.workers - sum(worker_work)) / len(tasks)
        print(f"{'':28}{'wall-clock s':>14}{'tasks run':>11}")
        print(f"{'plain loop (reference)':28}{serial_seconds:>14.2f}{len(serial.executed):>11}")
        print(f"{'LocalCluster start-up':28}{startup:>14.2f}")
        print(f"{f'LocalCluster, {args.workers} workers':28}{dask_seconds:>14.2f}{len(dask.executed):>11}")
        print(f"{'resume with all done':28}{resume_seconds:>14.2f}{len(resumed.executed):>11}")
        print(
            f"task seconds, sum: {sum(work):.2f} in the loop, {sum(worker_work):.2f} on the workers (above the "
            "loop's when the workers share the cores with other processes)"
        )
        print(
            f"median task {np.median(work):.3f} s; Dask overhead per task {overhead * 1000:.0f} ms; "
            f"speed-up over the loop {serial_seconds / dask_seconds:.2f}x (ideal {args.workers}x); "
            f"results equal: {_same(folder / 'serial', folder / 'dask')}"
        )


if __name__ == "__main__":
    main()
