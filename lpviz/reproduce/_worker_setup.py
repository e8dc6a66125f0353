"""A Dask worker preload (:func:`lpviz.reproduce.grid.local_cluster`): workers ignore Ctrl-C.

Ctrl-C in a terminal sends SIGINT to every process of the foreground group, the
LocalCluster's worker processes included: each printed its own 30-line
traceback before the client's one line "interrupted". The client stops the
tasks and closes the cluster on Ctrl-C, so the workers need not react to it
(a finished task is on disk already: ``--resume`` continues).
"""

import signal
import threading


def dask_setup(worker):
    if threading.current_thread() is threading.main_thread():  # only the main thread sets handlers
        signal.signal(signal.SIGINT, signal.SIG_IGN)
