"""The kernels of every registered model and method, loaded (or compiled) once per process: :func:`warm_up_kernels`."""

import threading

import numpy as np

_KERNELS_LOADED = threading.Event()  # process-wide: numba loads each kernel once per process
_KERNELS_LOCK = threading.Lock()


def warm_up_kernels():
    """Load (or compile) the kernels of every registered model and method once per process.

    The first chain of a fresh server process otherwise spends seconds loading
    Numba's cached kernels after Start is pressed; sessions call this in a
    background thread when they open, so the first point streams at once.
    """
    from lpviz import methods, models
    from lpviz.driver import run
    from lpviz.release import KIND_ORDERS, Release, Truth

    with _KERNELS_LOCK:
        if _KERNELS_LOADED.is_set():
            return
        Y = np.array([[0, 3, 1, 0], [2, 0, 5, 1], [1, 1, 0, 4], [0, 2, 3, 0]])
        for model_name, model_class in models.MODELS.items():
            kind = model_class.kinds[0]
            counts = Y if KIND_ORDERS[kind] == 2 else Y.reshape(4, 2, 2)  # an array of the kind's order
            release = Release(Y_obs=counts - 1, alpha=0.5, kind=kind)
            truth = Truth(counts)
            for method_name, method_class in methods.METHODS.items():
                try:
                    for _ in run(
                        release,
                        model=model_name,
                        method=method_name,
                        n_components=2,
                        n_iter=2,
                        burn_in=0,
                        thin=1,
                        truth=truth if method_class.uses_truth else None,
                        random_state=0,
                    ):
                        pass
                except Exception:  # a warm-up only saves time; a real run reports any error
                    pass
        # the scores' modules and compiled parts (ArviZ's diagnostics; for the final score's stacking ArviZ
        # itself with matplotlib, xarray, SciPy's optimiser and a Numba ufunc of ArviZ's): a fresh server's
        # first final score took 2-5 s more than the next, and every chain of the run waited for it
        try:
            _score_two_chains(Y)
        except Exception:  # a warm-up only saves time; a real score reports any error
            pass
        _KERNELS_LOADED.set()


def _score_two_chains(Y):
    """Score a tiny ensemble as a run's final score does (stacking, diagnostics, every chain's own)."""
    import lpviz
    from lpviz.release import Release, Truth

    release = Release(Y_obs=Y - 1, alpha=0.5, kind="documents")
    fit = lpviz.fit(release, method="naive", n_components=2, n_iter=12, burn_in=2, thin=1, chains=2, random_state=0)
    lpviz.score(fit, release, Truth(Y))
