"""Reading fit results from the store's chain runners, for the result views and export.

The runners update ``result`` many times a second while chains run; views
that compute metrics from it (NPMI over a 10,000-word vocabulary, Hungarian
alignment) refresh at most every ``min_interval`` seconds, and always when a
runner changes status, so a paused or finished fit is shown exactly.
"""

import time

METHODS = ("private", "naive", "nonprivate")
METHOD_LABELS = {"private": "private (LPLP)", "naive": "naive (truncated)", "nonprivate": "non-private"}


def fit_results(store):
    """``{method: result dict}`` for every runner that has saved a sample."""
    results = {}
    for method, runner in (getattr(store, "runners", None) or {}).items():
        result = getattr(runner, "result", None)
        if result and result.get("best") is not None:
            results[method] = result
    return results


def _has_sample(result):
    return bool(result) and result.get("best") is not None


def watch_fits(store, callback, min_interval=1.0):
    """Call ``callback()`` when fit results change, at most every ``min_interval`` s.

    Status changes always call it, except to ``"running"`` (a start or a
    resume changes no result; skipping it keeps Start quick); results before
    the first saved sample never do. Returns the
    list of (runner, watcher) pairs so the caller can unwatch.
    """
    last = [0.0]

    def on_change(*events):  # one event per parameter changed together
        now = time.monotonic()
        if all((event.name == "status" and event.new == "running")
               or (event.name == "result" and not _has_sample(event.old) and not _has_sample(event.new))
               for event in events):
            return  # nothing these views show has changed (no saved sample before or after)
        if any(event.name == "status" for event in events) or now - last[0] >= min_interval:
            last[0] = now
            callback()

    watchers = []
    for runner in (getattr(store, "runners", None) or {}).values():
        watchers.append((runner, runner.param.watch(on_change, ["result", "status"])))
    return watchers
