"""One chain over the workers of a Dask cluster, equal bit for bit to the chain in one process.

``lpviz.fit(release, ..., scheduler=ADDRESS or Client)`` (and ``lpviz fit --scheduler`` or the
CLI's ``LPVIZ_SCHEDULER``) cuts the release's rows into contiguous partitions, a whole number of
stream blocks (:data:`lpviz._parallel.ROWS_PER_STREAM` rows) each, and sends each to one worker
once. A partition lives there for the whole chain as a Dask *actor* (:class:`Partition`): its
counts, the method's latent state, its rows' factors (theta) and their saved samples and rate sums.
Actors fit because the state is mutable, large and bound to one worker: a task graph would either
copy it every iteration or need futures re-keyed each step, and an actor's calls go straight to
its worker (one round trip, no scheduler bookkeeping per call).

Why the chain is the same for any number of workers (docs/guides/distributed.md):

- each stream block's draws are keyed by (chain seed, iteration, global block): a partition seeds
  its blocks from its first block on (``Work.block_offset``), so its rows draw what the
  one-process chain draws for them;
- given phi, the rows are conditionally independent: the method's sweep, the allocation and
  theta's update run on each partition with the one-process chain's own hooks
  (:meth:`~lpviz.methods.base.Method.sweep_rows`, ``model.allocate``, ``model.update_rows``);
- phi's update needs over the rows only the allocated counts (integers: their sum is exact in any
  order) and theta's column sums. Floating-point sums over rows are left-to-right in the one
  process chain, so the driver passes a running total through the partitions in row order
  (:func:`~lpviz.models._kernels.column_sums_from` and friends continue a sum exactly): the same
  additions in the same order. Those passes cost one round trip per worker and K numbers each;
- the driver draws phi with ``model.update_columns``, the one-process chain's own call;
- the score of an iteration (the rows' log likelihood at the new phi) reads the phi the next sweep
  reads, and changes nothing the sweep reads: one call (:meth:`Partition.step`) runs both, and one
  pass in row order (:meth:`Partition.pass_on`) hands on that iteration's log-joint sums with the
  next theta's column sums. The draws are the same in the same order; an iteration's log joint
  (and its callback) comes one sweep later, and before a checkpoint or the end the score runs
  alone (:func:`_finish_iteration`). Theta's log-prior terms are computed in the score, on every
  worker at once, so the pass only adds them.

Per iteration each worker receives phi (V x K floats) once and returns its allocated counts
(K x V integers) and a few numbers; nothing of the data's size crosses the network after the start.

Held-out cells and structural zeros of the release (both models, MCMC and CAVI): each partition
leaves its rows' out; the sums over them the shared factors' draws need (topics: phi's rate sums,
theta's column sums less theta at each excluded cell of the column; tensor: the excluded parts of
b's and c's rate sums) and the excluded cells' rate pass through the partitions in row order, the
subtractions and additions of one process in its order (``model.update_columns_excluded``).

``inference="vi"`` (:class:`VariationalPartition`, :func:`_run_variational`): CAVI the same way,
each partition holding its rows' local q and theta's q. The expected allocations summed over rows
are fixed-point integers (:func:`lpviz.models._variational.add_fixed`: exact in any order), every
other sum over rows is handed on in row order, and the driver updates the shared factors' q with
the one-process fit's own call (``model.vi_update_columns``): the ELBO trace is the same bits.
"""

import contextlib
import json
import math
import os
import re
import secrets
import socket
import threading
import time
import weakref

import numpy as np
from numba import njit

from lpviz import methods as method_registry
from lpviz import models as model_registry
from lpviz._parallel import ROWS_PER_STREAM, chunk_bounds, limit_blas_threads, n_stream_blocks, new_stop_flag
from lpviz._random import chain_seed_from
from lpviz.engine import DENSE_MEAN_MAX_CELLS, ChainState, Posterior, _either, _lists, _schedule, count_itemsize
from lpviz.methods.base import Exclusions, mean_count_of
from lpviz.models._kernels import (
    _TINY,
    column_sums_from,
    gamma_log_prior,
    low_rank_rows,
    ordered_sum_from,
)
from lpviz.models._variational import VI_INIT_SHAPE, GammaFactor, check_fixed_bound, fixed_total
from lpviz.models.base import Work, check_count
from lpviz.release import Release, Truth

# numpy parses a .npy header with ast.literal_eval, and CPython 3.11's AST constructor keeps its recursion
# depth per interpreter, not per thread: two threads parsing at once raised "SystemError: AST constructor
# recursion depth mismatch" (CPython gh-106905; a resumed CAVI fit on a cluster of threads, full run of
# 2026-11-29). The workers of one process read their checkpoint parts one at a time.
_NPY_READ_LOCK = threading.Lock()

__all__ = [
    "fit",
    "connect",
    "partition_rows",
    "partition_bytes",
    "Partition",
    "DistributedPosterior",
    "VariationalPartition",
    "SchedulerUnreachable",
    "WorkerLost",
]

SCHEDULER_ENV = "LPVIZ_SCHEDULER"
# Seconds to reach a scheduler before giving up with one message (never a hang).
CONNECT_TIMEOUT = 10.0
# Cells of a generated release a worker builds at a time (RowsOf.build: int64 while built).
BUILD_CELLS = 1 << 22
# Rows of theta drawn and sent at a time at the start: the driver never holds all of theta.
START_ROWS = 1 << 16
# Cells whose masks and references one round of a score sends the workers (all of them together):
# the driver's share of a score stays about this many bits and sparse counts (lpviz.metrics.score).
SCORE_CELLS_IN_FLIGHT = 1 << 24
# A checkpoint's files: the driver's (driver.npz) and one per partition (rows-START-STOP.npz), each
# read by the bounded reader (lpviz._files.Archive). Every part is stamped with the checkpoint it
# belongs to (_STAMP: the driver's random id, the chain seed, the iteration, its rows, the number of
# parts), and resume refuses a part that is not the driver file's (issue 58).
CHECKPOINT_FORMAT = "lpviz-checkpoint-2"
CHECKPOINT_FIX = (
    "resume from the checkpoint as the chain left it (or put back the file it wrote), or run without "
    "resume=True to start the chain again"
)
_CHECKPOINT_NAME = re.compile(r"iteration-[0-9]{1,18}")
_LATEST_BYTES = 256
# what a save in progress (.tmp) or a checkpoint it replaced (.old) is called until it is renamed or removed
_STAGING = re.compile(r"\.iteration-[0-9]{1,18}\.[0-9a-f]{8}\.(tmp|old)")
_STAMP = ("checkpoint_id", "checkpoint_seed", "checkpoint_iteration", "checkpoint_rows", "checkpoint_parts")
# The hooks a model's update needs to split over machines: the rows' half, the sums it hands on,
# the other factors' half and its log likelihood from sums (the topic and tensor models have them).
SPLIT_HOOKS = ("update_rows", "column_counts", "update_columns", "row_loglik", "observed_rate_of_sums")


def splits_over_machines(model):
    """Whether ``model``'s rows (its first mode) split over machines (:data:`SPLIT_HOOKS`)."""
    return all(callable(getattr(model, hook, None)) for hook in SPLIT_HOOKS)


# Optional, for a model whose rows own no factor of their own (the block model: theta couples every
# actor, so the driver holds it with pi and draws both from the partitions' integer sums):
# ``split_row_width`` (columns of the rows' own factor on the workers; default n_components),
# ``split_shared_shapes(shape)`` (the driver's factors, in the start's order; default
# (n, n_components) per other mode), ``place_rows(start, stop)`` (a partition's model learns
# where its rows sit among every row), ``structural_zeros_of_rows(start, stop, n_cols)`` (the
# model's own zeros in those rows: out of the method's cells, never in the model's lists, as in
# one process), ``partition_rates(factors, start, stop)`` and
# ``partition_rate_rows(samples, start, stop, n_samples)`` (rates of rows [start, stop) that
# need every row's factors).
def _row_width(model):
    return getattr(model, "split_row_width", model.n_components)


def _shared_shapes(model, shape):
    shapes = getattr(model, "split_shared_shapes", None)
    return shapes(shape) if shapes is not None else tuple((int(n), model.n_components) for n in shape[1:])


# The hooks a model's CAVI update needs to split over machines (lpviz.models.topics has them).
VI_SPLIT_HOOKS = ("vi_update_rows", "vi_no_totals", "vi_row_totals", "vi_update_columns")


def splits_variational(model):
    """Whether ``model``'s variational fit splits its rows over machines (:data:`VI_SPLIT_HOOKS`)."""
    return "vi" in model.inferences and all(callable(getattr(model, hook, None)) for hook in VI_SPLIT_HOOKS)


class SchedulerUnreachable(ConnectionError):
    """No Dask scheduler answered at the address given."""


class WorkerLost(RuntimeError):
    """A worker holding rows of the chain was lost; resume from the last checkpoint."""


def _column_work(n_rows, n_cols, parallel, seed):
    """The driver's :class:`Work` for the shared factors' update: no rows of its own (the
    partitions hold them), the columns chunked as the one-process chain chunks them."""
    return Work(
        bounds=[(0, 0)],
        column_bounds=chunk_bounds(n_cols, n_rows * n_cols, parallel),
        parallel=bool(parallel),
        stop=new_stop_flag(),
        chain_seed=seed,
        missing_by_row=_empty_lists(1),
        missing_by_column=_empty_lists(n_cols),
    )


def _empty_lists(n):
    return (np.zeros(n + 1, dtype=np.int64), np.zeros(0, dtype=np.int64))


@njit(nogil=True, cache=True)
def _gamma_log_prior_terms(x, a0, b0):
    """The terms :func:`~lpviz.models._kernels.gamma_log_prior_from` adds one by one, each as it
    computes it: their :func:`~lpviz.models._kernels.ordered_sum_from` from a carry is its sum from
    that carry, bit for bit. A partition computes them in its score, at once with the others, so the
    pass that hands the sum on in row order only adds (no logarithm one worker after the other)."""
    const = a0 * math.log(b0) - math.lgamma(a0)
    flat = x.ravel()
    out = np.empty(flat.shape[0])
    for i in range(flat.shape[0]):
        value = max(flat[i], _TINY)
        out[i] = const + (a0 - 1.0) * math.log(value) - b0 * value
    return out


class RowsOf:
    """Rows [start, stop) of a source that builds rows where they are needed (``builds_rows``, e.g.
    :class:`lpviz.datasets.BlockwiseTopics`): what the driver sends a worker instead of counts."""

    def __init__(self, source, which, start=0, stop=None, itemsize=None):
        self.source, self.which = source, which
        self.start, self.stop = start, source.shape[0] if stop is None else stop
        # bytes per integer the memory check counted for these rows (None: not checked)
        self.itemsize = itemsize

    def __getitem__(self, rows):
        start, stop = self.start + rows.start, self.start + rows.stop
        # a source holding data (BlockwiseRelease: the true counts) is cut to the rows' own
        holding = getattr(self.source, "holding", None)
        source = self.source if holding is None else holding(start, stop)
        return RowsOf(source, self.which, start, stop, self.itemsize)

    def sample_itemsize(self):
        """Bytes per count of the rows' first generator block in the smallest integer dtype that holds
        it (one block built here, before any data moves): what the memory check counts for every row.
        :meth:`build` refuses rows that turn out wider, so the check never undercounts silently."""
        from lpviz.datasets.blockwise import GENERATOR_ROWS
        from lpviz.release import smallest_int_dtype

        piece = np.asarray(self.source.rows(self.start, min(self.stop, self.start + GENERATOR_ROWS), self.which))
        self.itemsize = int(np.dtype(smallest_int_dtype(piece)).itemsize) if piece.dtype.kind == "i" else None
        return self.itemsize

    def build(self):
        """The rows, built a few generator blocks at a time, integers each held in the smallest dtype
        that holds them (as the private method's ``prepare`` keeps them: the same values, the same
        chain): the worker's peak is about the narrow array, not the int64 rows twice over
        (the rows' blocks and their concatenation)."""
        from lpviz.datasets.blockwise import GENERATOR_ROWS
        from lpviz.release import smallest_int_dtype

        n_cols = math.prod(self.source.shape[1:]) if self.which != "alpha" else 1
        step = GENERATOR_ROWS * max(1, BUILD_CELLS // (GENERATOR_ROWS * max(n_cols, 1)))
        out, done = None, 0
        cuts = [self.start, *range((self.start // step + 1) * step, self.stop, step), self.stop]
        for first, last in zip(cuts[:-1], cuts[1:], strict=True):  # whole generator blocks, each built once
            piece = np.asarray(self.source.rows(first, last, self.which))
            if piece.dtype.kind == "i":
                piece = piece.astype(smallest_int_dtype(piece), copy=False)
                if self.itemsize is not None and piece.dtype.itemsize > self.itemsize:
                    from lpviz.budget import MemoryBudgetError

                    raise MemoryBudgetError(
                        f"rows {first:,}-{last:,} hold counts needing {piece.dtype} ({piece.dtype.itemsize} bytes "
                        f"each), wider than the {self.itemsize} bytes the memory check counted from the first "
                        "rows; fit over more workers or with more memory each"
                    )
            if out is None:
                out = np.empty((self.stop - self.start, *piece.shape[1:]), dtype=piece.dtype)
            elif np.result_type(out.dtype, piece.dtype) != out.dtype:  # a wider value: widen once
                out = out.astype(np.result_type(out.dtype, piece.dtype))
            out[done : done + len(piece)] = piece
            done += len(piece)
        return out if out is not None else np.ascontiguousarray(self.source.rows(self.start, self.stop, self.which))


def _positive_cells(method, counts, start, stop):
    """Rows [start, stop)'s positive cells as ``method`` counts them (:meth:`Method.positive_cells`;
    None: the method needs none), a block at a time; generated rows (RowsOf): estimated from their
    first generator block, built here before any data moves, scaled to the rows (rounded up), and
    checked again on the worker (:class:`Partition` refuses rows that hold more)."""
    if isinstance(counts, RowsOf):
        from lpviz.datasets.blockwise import GENERATOR_ROWS

        first = counts.start + start
        last = min(counts.start + stop, first + GENERATOR_ROWS)
        sample = np.asarray(counts.source.rows(first, last, counts.which))
        seen = method.positive_cells(sample.reshape(len(sample), -1))
        return None if seen is None else -(-seen * (stop - start) // max(len(sample), 1))
    return method.positive_cells(counts[start:stop])


def _piece(values, start, stop):
    """Rows [start, stop) to send a worker: a copy, or the description of rows it builds itself."""
    if values is None or isinstance(values, RowsOf):
        return None if values is None else values[start:stop]
    return np.ascontiguousarray(values[start:stop])


def _packed(mask, start, stop):
    """Rows [start, stop) of a boolean cell mask to send a worker: one bit a cell (None: every cell)."""
    if getattr(mask, "every", False):  # lpviz.metrics._Cells of every cell
        return None
    return np.packbits(np.asarray(mask[start:stop], dtype=bool).reshape(-1))


def _unpacked(bits, rows, n_cols):
    """Rows ``rows`` (a slice) of a mask :func:`_packed` sent, as a rows x columns boolean matrix."""
    n_rows = rows.stop - rows.start
    if bits is None:
        return np.ones((n_rows, n_cols), dtype=bool)
    low, high = rows.start * n_cols, rows.stop * n_cols  # the cells' bits; unpack only their bytes
    cells = np.unpackbits(bits[low // 8 : (high + 7) // 8])[low % 8 : low % 8 + (high - low)]
    return cells.view(bool).reshape(n_rows, n_cols)


def _reference_rows(reference, rows):
    """Rows ``rows`` of a reference :func:`_score_pieces` sent (sparse or dense), dense."""
    piece = reference[rows]
    return piece.toarray() if hasattr(piece, "toarray") else piece


def _score_pieces(observed, references, cells_list, start, stop):
    """Rows [start, stop) of the score's masks (a bit a cell) and references (true counts: sparse
    when that is smaller; true rates: dense) to send the worker holding them."""
    import scipy.sparse as sp

    pieces = []
    for reference in references:
        rows = np.asarray(reference[start:stop])
        rows = rows.reshape(rows.shape[0], -1)
        if rows.dtype.kind in "iu" and 12 * np.count_nonzero(rows) < rows.nbytes:
            rows = sp.csr_matrix(rows)
            if rows.nnz:  # the counts in the fewest bytes that hold them (exact as floats on the worker)
                low, high = np.min_scalar_type(rows.data.min()), np.min_scalar_type(rows.data.max())
                rows.data = rows.data.astype(np.promote_types(low, high))
        pieces.append(rows)
    # the observed cells are the score's first cell set too: sent once ("observed" names them)
    cells = ["observed" if cells is observed else _packed(cells, start, stop) for cells in cells_list]
    return _packed(observed, start, stop), pieces, cells


def partition_rows(n_rows, n_workers):
    """``[(start, stop), ...]``: contiguous row ranges, a whole number of stream blocks each
    (the last may end in a partial block), as even as blocks allow; no empty range."""
    n_blocks = n_stream_blocks(n_rows)
    n_parts = max(1, min(int(n_workers), n_blocks))
    cuts = [p * n_blocks // n_parts for p in range(n_parts + 1)]
    return [(cuts[p] * ROWS_PER_STREAM, min(n_rows, cuts[p + 1] * ROWS_PER_STREAM)) for p in range(n_parts)]


# ---------------------------------------------------------------------------
# Checkpoint files
# ---------------------------------------------------------------------------


def _stamp_arrays(stamp, start, stop):
    """The members binding a part to its checkpoint (:data:`_STAMP`): the driver's ``stamp``
    (id, seed, iteration, n_parts) and the part's rows."""
    return {
        "checkpoint_id": np.asarray(stamp["id"]),
        "checkpoint_seed": np.asarray(stamp["seed"], dtype=np.int64),
        "checkpoint_iteration": np.asarray(stamp["iteration"], dtype=np.int64),
        "checkpoint_rows": np.asarray([start, stop], dtype=np.int64),
        "checkpoint_parts": np.asarray(stamp["n_parts"], dtype=np.int64),
    }


def _open_checkpoint_file(path, what):
    from lpviz._files import open_archive

    return open_archive(path, what=what, fix=CHECKPOINT_FIX)


def _check_stamp(archive, stamp, start, stop):
    """Refuse the part ``archive`` (rows [start, stop)) unless it belongs to the checkpoint ``stamp``
    describes: the same id, chain seed, iteration, number of parts and the rows its name says."""
    missing = [key for key in _STAMP if key not in archive]
    if missing:
        raise archive.error(
            f"is not a part of a checkpoint this lpviz wrote (it has no {missing[0]!r}, which binds a part to "
            f"its checkpoint); {CHECKPOINT_FIX}"
        )
    seed = archive.read_scalar("checkpoint_seed", "iu")
    iteration = archive.read_scalar("checkpoint_iteration", "iu")
    parts = archive.read_scalar("checkpoint_parts", "iu")
    header = archive.header("checkpoint_rows")
    if header.shape != (2,) or header.dtype.kind not in "iu":
        raise archive.error(f"member 'checkpoint_rows' must hold two row numbers; {CHECKPOINT_FIX}")
    rows = tuple(int(n) for n in archive.read("checkpoint_rows"))
    ident = archive.read_text("checkpoint_id", max_chars=64)
    if seed != stamp["seed"]:
        problem = f"is a part of another chain (chain seed {seed}, not the checkpoint's {stamp['seed']})"
    elif iteration != stamp["iteration"]:
        problem = (
            f"is a part of the checkpoint of iteration {iteration:,}, not of iteration {stamp['iteration']:,} "
            "(the driver file's): it was copied from another checkpoint"
        )
    elif rows != (start, stop):
        problem = f"holds rows {rows[0]:,}-{rows[1]:,}, not the rows {start:,}-{stop:,} its name says"
    elif parts != stamp["n_parts"]:
        problem = f"is one of {parts:,} parts, but the checkpoint's driver file has {stamp['n_parts']:,}"
    elif ident != stamp["id"]:
        problem = (
            f"belongs to another checkpoint (its id {ident[:16]!r} is not the driver file's {stamp['id'][:16]!r}): "
            "it was copied from another run's checkpoint of this chain"
        )
    else:
        return
    raise archive.error(f"{problem}; {CHECKPOINT_FIX}")


def _check_members(archive, expected, *, others=()):
    """Refuse ``archive`` unless it holds every member of ``expected`` ({name: (shape, dtype kinds)})
    with that shape and kind, and nothing else (beyond ``others``); checked from the headers, before
    a byte of data is inflated."""
    for key in archive.keys():
        if key not in expected and key not in others:
            raise archive.error(f"holds a member {key[:40]!r}, which a checkpoint does not; {CHECKPOINT_FIX}")
    for key, (shape, kinds) in expected.items():
        if key not in archive:
            raise archive.error(f"has no member {key!r} (a checkpoint has one); {CHECKPOINT_FIX}")
        header = archive.header(key)
        if header.shape != tuple(shape) or header.dtype.kind not in kinds:
            want = " x ".join(f"{n:,}" for n in shape) or "a scalar"
            have = " x ".join(f"{n:,}" for n in header.shape) or "a scalar"
            raise archive.error(
                f"member {key!r} is {have} of {header.dtype}, not the {want} this checkpoint holds there; "
                f"{CHECKPOINT_FIX}"
            )
    archive.require(list(expected), what="reading the checkpoint")


def _part_path(folder, start, stop):
    return os.path.join(folder, f"rows-{start}-{stop}.npz")


# ---------------------------------------------------------------------------
# The worker side
# ---------------------------------------------------------------------------


class Partition:
    """Rows [start, stop) of a chain, kept on one worker (a Dask actor) for the chain's life."""

    def __init__(self, spec, counts, alpha, mask=None):
        limit_blas_threads()
        self.start_row, self.stop_row = spec["rows"]
        # a release generated blockwise: its rows are built here, on the worker (never on the driver)
        counts, alpha = (piece.build() if isinstance(piece, RowsOf) else piece for piece in (counts, alpha))
        self.model = model_registry.create(spec["model"], spec["n_components"], a0=spec["a0"], b0=spec["b0"])
        if hasattr(self.model, "place_rows"):
            self.model.place_rows(self.start_row, self.stop_row)
        self.method = method_registry.create(spec["method"], **spec["options"])
        counts = np.asarray(counts)
        n_rows = counts.shape[0]
        counts = counts.reshape(n_rows, -1)  # the methods see the cells as a matrix (higher orders too)
        n_cols = counts.shape[1]
        self.n_cols = n_cols
        self.dense_mean = spec["dense_mean"]
        parallel = spec["parallel"]
        n_cells = n_rows * n_cols
        # the release's excluded cells in these rows (held out, structural zeros): left out of the likelihood
        mask = None if mask is None else np.asarray(mask, dtype=bool).reshape(n_rows, n_cols)
        missing = _lists(mask, n_rows)
        # the model's own zeros (the block model's self loops): out of the method's cells, not in the
        # model's lists (its kernels skip them), as one process leaves them
        zeros_of_rows = getattr(self.model, "structural_zeros_of_rows", None)
        zeros = None if zeros_of_rows is None else zeros_of_rows(self.start_row, self.stop_row, n_cols)
        excluded = mask if zeros is None else _either(mask, zeros)
        self.work = Work(
            bounds=chunk_bounds(n_rows, n_cells, parallel),
            column_bounds=[(0, 0)],
            parallel=bool(parallel) if parallel is not None else len(chunk_bounds(n_rows, n_cells)) > 1,
            stop=new_stop_flag(),
            chain_seed=spec["chain_seed"],
            missing_by_row=missing,
            missing_by_column=_empty_lists(n_cols),  # phi's half runs on the driver
            block_offset=self.start_row // ROWS_PER_STREAM,
        )
        self.n_observed = n_cells - (0 if excluded is None else int(excluded.sum()))
        rows = missing if zeros is None else _lists(excluded, n_rows)
        exclusions = Exclusions(mask=excluded, rows=rows, n_observed=self.n_observed)
        # generated rows: the most positive cells this worker's memory limit holds (the memory check's
        # estimate from the first rows and the bytes to spare beyond it)
        counted = spec.get("positive")
        if counted is not None:
            positive = self.method.positive_cells(counts)
            if positive is not None and positive > counted:
                from lpviz.budget import MemoryBudgetError

                raise MemoryBudgetError(
                    f"rows {self.start_row:,}-{self.stop_row:,} hold {positive:,} positive cells, more than the "
                    f"{counted:,} this worker's memory limit holds beside the rest of the chain (the memory check "
                    f"estimated them from the first rows; {self.method.name} keeps 16 bytes a positive cell); "
                    "fit over more workers or with more memory each"
                )
        self.prepared = self.method.prepare(counts, alpha, exclusions)
        # the state is (theta, *globals): the rows' factor (the first mode's) and the factors every row
        # shares (topics: phi^T; tensor: the second and third modes'), which the driver draws
        self.theta = np.empty((n_rows, _row_width(self.model)))
        self.state = None
        self.latent = None
        self.counts = None
        self.rows = {}
        self.row_log = None
        self.samples = []  # theta of each saved sample
        self.rate_sum = None

    def count_total(self):
        return int(self.prepared.count_total)

    def probe(self, payload):
        """A call carrying ``payload`` there and back, touching nothing (what benchmarks time the
        cluster's round trips by: benchmarks/bench_distributed.py)."""
        return payload

    def observed(self):
        """How many of these rows' cells the chain fits (the excluded and the model's zeros left out)."""
        return self.n_observed

    def set_theta(self, first, values):
        """Write rows [first, first + len(values)) of theta (local row numbers)."""
        self.theta[first : first + len(values)] = values

    def begin(self, shared):
        self.state = (self.theta, *(np.array(factor) for factor in shared))
        self.latent = self.method.start(self.prepared, self.model, self.state, self.work, None)
        return True

    def _set_shared(self, shared):
        for mine, factor in zip(self.state[1:], shared, strict=True):
            mine[...] = factor

    def sweep(self, shared, iteration):
        """The method's sweep and theta's update at the shared factors; returns the allocated counts
        the driver's draw needs (``model.column_counts``: integers) and the seconds it took here."""
        began = time.perf_counter()
        self._set_shared(shared)
        stats = self.model.new_stats(self.state, self.work)
        self.counts, self.rows = self.method.sweep_rows(
            self.prepared, self.latent, self.model, self.state, stats, self.work, iteration
        )
        self.model.update_rows(self.state, stats[0], self.work, iteration)
        counts = self.model.column_counts(stats)
        # the seconds this worker spent (the driver's round less them: waiting and the network)
        return counts, time.perf_counter() - began

    def step(self, shared, iteration, save):
        """:meth:`score` of the previous iteration (``save`` as score's; None: no score pending) and
        :meth:`sweep` of ``iteration``, one call at the same shared factors (the previous iteration's
        draw: what its score and this sweep both read); returns the allocated counts and the seconds
        of each here."""
        scored = 0.0 if save is None else self.score(shared, save)
        counts, swept = self.sweep(shared, iteration)
        return counts, (scored, swept)

    def pass_on(self, totals, theta_carry):
        """One hop of the pass in row order after :meth:`step`: the scored iteration's sums
        (:meth:`carry`; None: none pending) and the new theta's column sums (:meth:`theta_sums`)."""
        return (None if totals is None else self.carry(totals)), self.theta_sums(theta_carry)

    def theta_sums(self, carry):
        """Theta's column sums continued from ``carry`` (the rows before this partition's)."""
        return column_sums_from(self.theta, carry)

    def rows_pass(self, kind, carry, factors):
        """Continue a sum over the excluded cells of these rows (``model.rows_pass``), the shared
        factors drawn since the sweep (``factors``: by position in the state) set first."""
        for position, factor in factors.items():
            self.state[position][...] = factor
        return self.model.rows_pass(kind, self.state, self.work, carry)

    def score(self, shared, save):
        """The rows' log likelihood at the new shared factors; ``save``: keep this sample. Returns
        the seconds it took here."""
        began = time.perf_counter()
        self._set_shared(shared)
        self.row_log = self.model.row_loglik(self.state, self.counts, self.work)
        # theta's log prior, term by term, for carry's pass in row order to add only; the sweep's per-row
        # terms and theta (for the excluded cells' rate) as scored: the next sweep may run before carry
        self.prior_terms = _gamma_log_prior_terms(self.theta, self.model.a0, self.model.b0)
        self.scored_rows = self.rows
        excluded = len(self.work.missing_by_row[1]) > 0
        self.scored_state = (self.theta.copy(), *self.state[1:]) if excluded else self.state
        if save:
            theta = self.theta.copy()
            self.samples.append(theta)
            if self.dense_mean:
                rates = self._rates(theta)
                self.rate_sum = rates if self.rate_sum is None else self.rate_sum + rates
        return time.perf_counter() - began

    def carry(self, totals):
        """Continue the last scored iteration's sums over rows: (log likelihood rows, theta's prior,
        the method's per-row terms by name, the excluded cells' rate), from what :meth:`score` kept
        (the next sweep may have run since)."""
        loglik, prior, terms, excluded = totals
        loglik = ordered_sum_from(self.row_log, loglik)
        prior = ordered_sum_from(self.prior_terms, prior)  # gamma_log_prior_from's additions, computed in score
        terms = {name: ordered_sum_from(values, terms.get(name, 0.0)) for name, values in self.scored_rows.items()}
        if len(self.work.missing_by_row[1]):  # the rate of the excluded cells, left out of the likelihood
            excluded = self.model.excluded_rate_from(self.scored_state, self.work, excluded)
        return loglik, prior, terms, excluded

    def _rates(self, theta):
        """The rates of these rows (as a matrix), as Posterior.add_sample's ``model.rates(factors)``."""
        own = getattr(self.model, "partition_rates", None)
        if own is not None:  # rates that need every row's factors (the block model's theta)
            rates = own(self.model.factors((theta, *self.state[1:])), self.start_row, self.stop_row)
            return rates.reshape(theta.shape[0], -1)
        # one row alone goes through BLAS's matrix-vector path, whose rounding differs from the
        # matrix product's: compute it as a row of a two-row product
        rows = np.vstack([theta, np.zeros_like(theta)]) if theta.shape[0] == 1 else theta
        rates = self.model.rates(self.model.factors((rows, *self.state[1:])))
        return rates[: theta.shape[0]].reshape(theta.shape[0], -1)

    def rate_rows(self, start, stop, n_samples, shared_samples):
        """Posterior mean rates of local rows [start, stop), as :meth:`Posterior.rate_rows` computes them."""
        if self.rate_sum is not None:
            return self.rate_sum[start:stop] / n_samples
        own = getattr(self.model, "partition_rate_rows", None)
        if own is not None:  # rates that need every row's factors (the block model's theta)
            pairs = zip(self.samples, shared_samples, strict=True)
            samples = [self.model.factors((theta, *shared)) for theta, shared in pairs]
            return own(samples, self.start_row + start, self.start_row + stop, n_samples)
        pieces = [
            self.model.low_rank(self.model.factors((theta, *shared)))
            for theta, shared in zip(self.samples, shared_samples, strict=True)
        ]
        left = np.hstack([piece[0][start:stop] for piece in pieces])
        right = np.hstack([piece[1] for piece in pieces])
        return low_rank_rows(left, right) / n_samples

    def score_begin(self, n_samples, shared_samples):
        """Keep the saved samples' count and shared factors for the score's :meth:`block_sums`
        calls (sent once; ``(0, None)`` lets them go)."""
        self.score_samples = (n_samples, shared_samples)
        return True

    def block_sums(self, blocks, first, pieces):
        """:func:`lpviz.metrics._block_sums` of the score's row blocks ``blocks`` (local rows), each
        from its rates here: the score's checks and sums without the rates leaving the worker.
        ``pieces``: the score's masks and references for local rows [first, ...) (:func:`_score_pieces`)."""
        from lpviz.metrics import _block_sums

        observed, references, cells_list = pieces
        parts = []
        for start, stop in blocks:
            rows = slice(start - first, stop - first)
            part = _block_sums(
                self.rate_rows(start, stop, *self.score_samples),
                _unpacked(observed, rows, self.n_cols),
                [_reference_rows(reference, rows) for reference in references],
                [_unpacked(observed if isinstance(cells, str) else cells, rows, self.n_cols) for cells in cells_list],
            )
            parts.append(part)
            if not part[0]:  # a rate not finite: the score stops here
                break
        return parts

    def sample(self, index):
        return self.samples[index]

    def sample_sums(self, index, carry):
        """The column sums of saved sample ``index``'s theta continued from ``carry`` (the rows before)."""
        return column_sums_from(self.samples[index], carry)

    def save(self, folder, stamp):
        """Write this partition's state (theta, saved samples, rate sum) into ``folder``, atomically,
        stamped with the checkpoint it belongs to (``stamp``: :func:`_stamp_arrays`)."""
        from lpviz._files import atomic_write

        arrays = {"theta": self.theta, "n_samples": np.asarray(len(self.samples))}
        for i, theta in enumerate(self.samples):
            arrays[f"sample_{i}"] = theta
        if self.rate_sum is not None:
            arrays["rate_sum"] = self.rate_sum
        arrays.update(_stamp_arrays(stamp, self.start_row, self.stop_row))
        path = _part_path(folder, self.start_row, self.stop_row)
        atomic_write(path, lambda handle: np.savez(handle, **arrays))
        return True

    def restore(self, folder, pieces, stamp):
        """Take this partition's rows from the checkpoint's partitions ``pieces`` [(start, stop)]
        (a checkpoint made on another number of workers cuts the rows elsewhere), each part read by
        the bounded reader and refused unless it belongs to the checkpoint ``stamp`` describes and
        holds the arrays (shapes) this chain saves."""
        n = stamp["n_samples"]
        width = self.theta.shape[1]
        samples = [np.empty_like(self.theta) for _ in range(n)]
        # the rate sum is kept from the first saved sample on when the mean is dense
        rate_sum = np.empty((len(self.theta), self.n_cols)) if self.dense_mean and n else None
        for start, stop in pieces:
            low, high = max(start, self.start_row), min(stop, self.stop_row)
            if low >= high:
                continue
            with _NPY_READ_LOCK, _open_checkpoint_file(_part_path(folder, start, stop), "checkpoint part") as archive:
                _check_stamp(archive, stamp, start, stop)
                rows = (stop - start, width)
                expected = {"theta": (rows, "f"), "n_samples": ((), "iu")}
                expected.update({f"sample_{i}": (rows, "f") for i in range(n)})
                if rate_sum is not None:
                    expected["rate_sum"] = ((stop - start, self.n_cols), "f")
                _check_members(archive, expected, others=_STAMP)
                if archive.read_scalar("n_samples", "iu") != n:
                    raise archive.error(f"holds another number of saved samples than its checkpoint; {CHECKPOINT_FIX}")
                mine, theirs = slice(low - self.start_row, high - self.start_row), slice(low - start, high - start)
                self.theta[mine] = archive.read("theta")[theirs]
                for i in range(n):
                    samples[i][mine] = archive.read(f"sample_{i}")[theirs]
                if rate_sum is not None:
                    rate_sum[mine] = archive.read("rate_sum")[theirs]
        self.samples, self.rate_sum = samples, rate_sum
        return True


class VariationalPartition(Partition):
    """Rows [start, stop) of a CAVI fit (``inference="vi"``), kept on one worker: their counts, the
    method's local q (e.g. the private method's expected true counts) and theta's q. Each iteration
    it runs the method's local step and theta's update at the driver's q of the shared factors and
    returns the shared factors' allocated totals (fixed-point integers: exact in any order)."""

    def _shared_q(self, shared):
        prior = (self.model.a0, self.model.b0)
        return tuple(GammaFactor(shape, rate, prior) for shape, rate in shared)

    def vi_begin(self, shared):
        """theta's q around the start's draws (as ``model.vi_init``), then the method's (``vi_start``)."""
        theta = GammaFactor.around(self.theta, VI_INIT_SHAPE, (self.model.a0, self.model.b0))
        self.theta = np.empty((0, self.model.n_components))  # theta's q holds the rows now
        self.q = (theta, *self._shared_q(shared))
        self.latent = self.method.vi_start(self.prepared, self.model, self.q, self.work)
        return True

    def vi_constant_from(self, carry):
        return self.method.vi_constant_from(self.latent, carry)

    def vi_sweep(self, shared):
        """The local step and theta's update at the shared factors' q ``shared`` ((shape, rate) each)."""
        self.q = (self.q[0],)  # the previous q let go first: one q of the shared factors at a time
        # the last sweep's expected counts (one process keeps them for fit.y_expected; nothing here
        # reads them): let go before the next are made
        if isinstance(self.latent, dict) and "y_expected" in self.latent:
            self.latent["y_expected"] = None
        self.q = (self.q[0], *self._shared_q(shared))
        stats = self.model.vi_new_stats(self.q, self.work)
        self.method.vi_sweep(self.prepared, self.latent, self.model, self.q, stats, self.work)
        row_sums, *column_parts = stats["sums"]
        self.rows = self.model.vi_update_rows(self.q, row_sums, stats["weights"], self.work)
        return tuple(part.sum(axis=0) for part in column_parts), stats["weights"], stats["bound"]

    def vi_carry(self, carry):
        """Continue the sums over rows (theta's totals, the cells' ELBO terms) from ``carry``."""
        totals, cells = carry
        return self.model.vi_row_totals(self.q, self.rows, totals), ordered_sum_from(self.latent["cell_rows"], cells)

    def vi_rows_pass(self, kind, carry, factors):
        """Continue a sum over the excluded cells of these rows (``model.vi_rows_pass``), the
        shared factors' q updated since the sweep (``factors``: (shape, rate) by position) set first."""
        prior = (self.model.a0, self.model.b0)
        q, self.q = list(self.q), None
        for position, (shape, rate) in factors.items():
            q[position] = None  # the previous q let go first (as in vi_sweep)
            q[position] = GammaFactor(shape, rate, prior)
        self.q = tuple(q)
        return self.model.vi_rows_pass(kind, self.q, self.work, carry)

    def vi_means(self):
        return self.q[0].mean

    def _vi_row_arrays(self):
        """The state a CAVI fit carries from one iteration to the next on these rows, by name:
        theta's q (all six arrays, as the kernels left them) and the method's local q (every
        array of ``latent`` with a row per row, e.g. the private method's noise rates' q);
        the rest of ``latent`` is the data's or rewritten by every sweep."""
        n_rows = self.stop_row - self.start_row
        arrays = {f"theta_q_{i}": array for i, array in enumerate(self.q[0].arrays())}
        for name, value in (self.latent or {}).items():
            if isinstance(value, np.ndarray) and value.ndim >= 1 and value.shape[0] == n_rows:
                arrays[f"latent_{name}"] = value
        return arrays

    def vi_save(self, folder, stamp):
        """Write this partition's CAVI state (:meth:`_vi_row_arrays`) into ``folder``, atomically,
        stamped with the checkpoint it belongs to."""
        from lpviz._files import atomic_write

        arrays = self._vi_row_arrays()
        arrays.update(_stamp_arrays(stamp, self.start_row, self.stop_row))
        path = _part_path(folder, self.start_row, self.stop_row)
        atomic_write(path, lambda handle: np.savez(handle, **arrays))
        return True

    def vi_restore(self, folder, pieces, stamp):
        """Take this partition's CAVI state from the checkpoint's partitions ``pieces`` (cut as
        another cluster's, perhaps), in place, after :meth:`vi_begin`; each part read by the
        bounded reader and refused unless it belongs to the checkpoint ``stamp`` describes."""
        mine = self._vi_row_arrays()
        for start, stop in pieces:
            low, high = max(start, self.start_row), min(stop, self.stop_row)
            if low >= high:
                continue
            with _NPY_READ_LOCK, _open_checkpoint_file(_part_path(folder, start, stop), "checkpoint part") as archive:
                _check_stamp(archive, stamp, start, stop)
                if not set(mine) <= set(archive.keys()):  # (the sweep's outputs may be there too)
                    raise ValueError(f"the checkpoint in {folder!r} holds another fit's state (method or model differ)")
                expected = {name: ((stop - start, *array.shape[1:]), array.dtype.kind) for name, array in mine.items()}
                sweep_outputs = [key for key in archive.keys() if key.startswith("latent_") and key not in mine]
                _check_members(archive, expected, others=(*_STAMP, *sweep_outputs))
                for name, array in mine.items():
                    array[low - self.start_row : high - self.start_row] = archive.read(name)[low - start : high - start]
        return True


# ---------------------------------------------------------------------------
# The driver side
# ---------------------------------------------------------------------------


def connect(scheduler, timeout=CONNECT_TIMEOUT):
    """``(client, owned)``: a :class:`distributed.Client` for ``scheduler`` (an address, or a
    Client, which stays the caller's); ``owned``: whether to close it. An address no scheduler
    answers at raises :class:`SchedulerUnreachable` after ``timeout`` seconds."""
    from distributed import Client

    if not isinstance(scheduler, str):
        if not hasattr(scheduler, "scheduler_info"):
            raise TypeError(f"scheduler must be an address (str) or a distributed.Client, got {scheduler!r}")
        return scheduler, False
    try:
        client = Client(scheduler, timeout=timeout)
    except (OSError, TimeoutError) as error:
        raise SchedulerUnreachable(
            f"no Dask scheduler answered at {scheduler!r} within {timeout:g} s ({type(error).__name__}); "
            "start one (`dask scheduler` and `dask worker ADDRESS`) or fix the address "
            f"(--scheduler / {SCHEDULER_ENV})"
        ) from None
    return client, True


def cluster_workers(client):
    """The cluster's workers now, ``{address: info}``, fetched from the scheduler.

    Not ``client.scheduler_info()["workers"]``: distributed 2026.8 refreshes that cache every 2 s
    from its event loop with ``n_workers=0`` (no workers), so a refresh between the method's fetch
    and its return leaves no workers (a chain was refused "the scheduler has no workers" on a cluster
    of 4; tests/test_distributed.py checks that upstream still does so)."""
    if getattr(client, "asynchronous", False) or not hasattr(client, "sync"):
        return client.scheduler_info().get("workers", {})
    return client.sync(client.scheduler.identity, n_workers=-1).get("workers", {})


def _worker_memory(client):
    workers = cluster_workers(client)
    return {address: int(info.get("memory_limit") or 0) for address, info in workers.items()}


class DistributedPosterior(Posterior):
    """The :class:`~lpviz.engine.Posterior` of a chain over a cluster: traces and phi's samples on
    the driver, theta's samples and the rate sums on the workers.

    :meth:`rate_rows` fetches a block of rows; ``mu_hat``, ``samples`` and ``best`` gather what
    they hold (``mu_hat`` is dense: rows x columns on the driver; read it by blocks with
    :meth:`rate_rows` when that is too large); :meth:`gather` returns a plain Posterior.
    """

    def __init__(self, model, method, shape, *, burn_in, thin, partitions, actors):
        # Posterior's attributes without its dense running sum: the sums live on the workers
        self.model_instance = model
        self.heldout = None
        self.structural_zeros = None
        self.model = model.name
        self.method = method.name
        self.method_label = method.display_name
        self.n_components = model.n_components
        self.shape = tuple(shape)
        self.burn_in, self.thin = burn_in, thin
        # shared_samples: per saved sample, the shared factors as the chain holds them (topics: (phi^T,))
        self.saved_iterations, self.shared_samples, self.saved_log_joint = [], [], []
        self._log_joint, self._log_marginal, self._seconds = [], [], []
        self._rate_sum = None
        self._mu_hat = None
        self.partitions, self.actors = partitions, actors
        self.bytes_moved = []  # per iteration: bytes of arrays sent to and received from the workers
        self.phases = []  # per iteration: the parts' seconds (_one_iteration: rows' round, passes, phi's draw)
        self.part_bytes = []  # per iteration: bytes moved by part (phi out, the counts back, the passes)
        self.score_bytes = None  # bytes the last score's row-block sums moved (block_sums)

    def record(self, state_traces, shared, saved):
        log_joint, log_marginal, seconds = state_traces
        self._log_joint.append(log_joint)
        self._log_marginal.append(log_marginal)
        self._seconds.append(seconds)
        if saved is not None:
            self.saved_iterations.append(saved)
            self.shared_samples.append(shared)
            self.saved_log_joint.append(log_joint)
            self._mu_hat = None

    @property
    def best_index(self):
        if not self.saved_log_joint:
            return None
        best = 0
        for i, value in enumerate(self.saved_log_joint):  # the first of the highest, as Posterior.add_sample
            if value > self.saved_log_joint[best]:
                best = i
        return best

    @property
    def best_iteration(self):
        index = self.best_index
        return None if index is None else self.saved_iterations[index]

    @property
    def best_log_joint(self):
        index = self.best_index
        return -math.inf if index is None else float(self.saved_log_joint[index])

    def _sample(self, index):
        theta = np.vstack([actor.sample(index).result() for actor in self.actors])
        return self.model_instance.factors((theta, *self.shared_samples[index]))

    @property
    def best(self):
        index = self.best_index
        return None if index is None else self._sample(index)

    def best_without_rows(self):
        """``(factors, row_sums)`` of the best sample without gathering its rows (for
        :func:`lpviz.metrics.score`): its factors with the rows' own (theta: rows x K on the
        workers) left empty, and theta's column sums over every row, summed on the workers in row
        order (numpy's ``theta.sum(axis=0)``'s additions: the same bits), K numbers from each.
        A model whose rows own no factor (the block model: theta is the driver's) gives its whole
        factors and None. ``(None, None)`` before a saved sample."""
        index = self.best_index
        if index is None:
            return None, None
        width = _row_width(self.model_instance)
        if not width:
            return self._sample(index), None
        sums = np.zeros(width)
        for actor in self.actors:
            sums = actor.sample_sums(index, sums).result()
        return self.model_instance.factors((np.zeros((0, width)), *self.shared_samples[index])), sums

    @property
    def samples(self):
        """Every saved sample, theta gathered from the workers (rows x K each)."""
        return [self._sample(i) for i in range(len(self.shared_samples))]

    @property
    def n_saved(self):
        return len(self.saved_iterations)

    @property
    def mu_hat(self):
        """Posterior mean rates of every cell, gathered (dense, rows x columns on the driver)."""
        if not self.shared_samples:
            return None
        if self._mu_hat is None:
            self._mu_hat = self.rate_rows(0, self.shape[0])
        return self._mu_hat

    def rate_rows(self, start, stop):
        if not self.shared_samples:
            return None
        pieces = []
        for (first, last), actor in zip(self.partitions, self.actors, strict=True):
            low, high = max(start, first), min(stop, last)
            if low < high:
                pieces.append(actor.rate_rows(low - first, high - first, len(self.shared_samples), self.shared_samples))
        mu = np.vstack([piece.result() for piece in pieces]) if pieces else np.zeros((0, self.shape[1]))
        return mu.reshape((mu.shape[0],) + self.shape[1:])

    def block_sums(self, blocks, observed, references, cells_list):
        """:func:`lpviz.metrics._block_sums` of each row block of ``blocks`` in order, for
        :func:`lpviz.metrics.score`: a block inside one partition is summed on its worker (which
        receives the block's rows of the masks, a bit a cell, and of the references, and returns a
        few numbers); a block across a partition's edge is summed here from its rates. Either way
        the same operations on the same block as in one process: the same bits. The blocks go in
        rounds of at most :data:`SCORE_CELLS_IN_FLIGHT` cells over all workers, two rounds in
        flight, so the driver holds a bounded part of the masks and references at a time. Bytes
        sent and received: :attr:`score_bytes`."""
        from lpviz.metrics import _block_sums, _check_stop

        n_samples = len(self.shared_samples)
        # the low-rank path needs the saved shared factors (sent once); a partition with a rate sum does not
        shared = None if math.prod(self.shape) <= DENSE_MEAN_MAX_CELLS else self.shared_samples
        n_cols = math.prod(self.shape[1:])
        per_call = max(1, SCORE_CELLS_IN_FLIGHT // len(self.actors)) // max(n_cols, 1)  # rows
        chunks = {}  # partition -> [[block, ...], ...]: each chunk one call
        for start, stop in blocks:
            for index, (first, last) in enumerate(self.partitions):
                if first <= start and stop <= last:
                    mine = chunks.setdefault(index, [[]])
                    if mine[-1] and stop - mine[-1][0][0] > per_call:
                        mine.append([])
                    mine[-1].append((start, stop))
        moved = 0
        for future in [self.actors[index].score_begin(n_samples, shared) for index in chunks]:
            future.result()
        moved += len(chunks) * _nbytes(shared)
        parts, pending = {}, []
        n_rounds = max((len(mine) for mine in chunks.values()), default=0)
        try:
            for round_ in range(n_rounds):
                _check_stop()  # a Stop leaves between rounds: at most two rounds' work still runs on the workers
                calls = []
                for index, mine in chunks.items():
                    if round_ < len(mine):
                        first, chunk = self.partitions[index][0], mine[round_]
                        low, high = chunk[0][0], chunk[-1][1]
                        pieces = _score_pieces(observed, references, cells_list, low, high)
                        local = [(start - first, stop - first) for start, stop in chunk]
                        calls.append((chunk, self.actors[index].block_sums(local, low - first, pieces)))
                        moved += _nbytes(pieces)
                pending.append(calls)
                while len(pending) > (1 if round_ + 1 < n_rounds else 0):  # the next round is sent meanwhile
                    for chunk, future in pending.pop(0):
                        results = future.result()
                        moved += sum(8 * (2 + len(sums or ())) for _, _, sums in results)
                        parts.update(zip(chunk, results, strict=False))
        finally:  # done or stopped: the workers let the samples go (after the rounds already sent)
            for future in [self.actors[index].score_begin(0, None) for index in chunks]:
                future.result()
        self.score_bytes = moved
        for start, stop in blocks:
            if (start, stop) in parts:
                yield parts[(start, stop)]
            elif any(first <= start and stop <= last for first, last in self.partitions):
                return  # its partition stopped at a rate that is not finite, before this block
            else:  # across a partition's edge: its rates come here (a block, at most W - 1 of them)
                sent = sum(first < stop and start < last for first, last in self.partitions)
                self.score_bytes += 8 * (stop - start) * n_cols + (0 if shared is None else sent * _nbytes(shared))
                yield _block_sums(  # (the rates held by no name here: gone before the next block's come)
                    self.rate_rows(start, stop),
                    observed[start:stop],
                    [reference[start:stop] for reference in references],
                    [cells[start:stop] for cells in cells_list],
                )

    def gather(self):
        """A plain :class:`Posterior` holding everything on the driver (rows x columns rates)."""
        posterior = Posterior(
            self.model_instance,
            self.method_label,
            self.shape,
            burn_in=self.burn_in,
            thin=self.thin,
            heldout=self.heldout,
            structural_zeros=self.structural_zeros,
        )
        posterior.method = self.method
        posterior._log_joint, posterior._log_marginal = list(self._log_joint), list(self._log_marginal)
        posterior._seconds = list(self._seconds)
        posterior.samples, posterior.saved_iterations = self.samples, list(self.saved_iterations)
        index = self.best_index
        if index is not None:
            posterior.best = posterior.samples[index]
            posterior.best_log_joint, posterior.best_iteration = self.best_log_joint, self.best_iteration
        posterior._rate_sum = None
        posterior._mu_hat = self.mu_hat
        return posterior

    def close(self):
        """Release the workers' partitions (and the client, when the fit opened it itself);
        gather first what you need of the rows."""
        self.actors = []
        finalizer = getattr(self, "_finalizer", None)
        if finalizer is not None:
            finalizer()

    def __repr__(self):
        return (
            f"DistributedPosterior(model={self.model!r}, method={self.method!r}, shape={self.shape}, "
            f"workers={len(self.actors)}, iterations={self.iterations}, saved={self.n_saved})"
        )


def _nbytes(value):
    if isinstance(value, np.ndarray):
        return value.nbytes
    if hasattr(value, "indptr"):  # a sparse matrix
        return value.data.nbytes + value.indices.nbytes + value.indptr.nbytes
    if value is None:
        return 0
    if isinstance(value, (tuple, list)):
        return sum(_nbytes(v) for v in value)
    if isinstance(value, dict):
        return sum(_nbytes(v) for v in value.values())
    return 8


def fit(
    data,
    *,
    scheduler,
    model=None,
    method="private",
    n_components,
    n_iter=1000,
    burn_in=None,
    thin=25,
    truth=None,
    a0=0.1,
    b0=1.0,
    random_state=None,
    parallel=None,
    callback=None,
    timeout=CONNECT_TIMEOUT,
    workers=None,
    checkpoint=None,
    checkpoint_every=25,
    resume=False,
    inference="mcmc",
    tol=None,
    **options,
):
    """:func:`lpviz.fit` of one chain over the workers of the Dask cluster at ``scheduler``: the
    same chain, bit for bit, as in one process with the same seed; returns a
    :class:`DistributedPosterior` (rates and theta stay on the workers until asked for).

    ``workers``: the workers to use (addresses, or how many; default every worker of the cluster,
    in the scheduler's sorted order); ``timeout``: seconds to reach the scheduler.

    ``checkpoint``: a folder (every worker and the driver must reach it: the cluster's shared
    storage) where the chain's state is saved every ``checkpoint_every`` iterations, atomically
    (the parts of a checkpoint first, then the file ``LATEST`` naming it). A lost worker stops the
    chain with :class:`WorkerLost`; ``resume=True`` with the same arguments continues from the
    last checkpoint, on any number of workers, and gives the chain an unbroken run gives.

    ``inference="vi"``: coordinate-ascent VI (``tol`` and the method's VI options as
    :func:`lpviz.vi.variational_run`), its rows and their local q on the workers: the ELBO trace and
    the fit equal the one-process fit's bit for bit; returns a
    :class:`~lpviz.engine.VariationalPosterior` (E[theta] gathered: rows x K on the driver).
    ``checkpoint``/``resume`` as above: each worker saves its rows' q (theta's and the method's
    local q), the driver the shared factors' q and the ELBO trace; a resumed fit is the unbroken
    fit's bits."""
    if not isinstance(data, Release) and not getattr(data, "builds_rows", False):
        raise TypeError("a chain over a cluster fits a Release (lpviz.Release(...)); wrap the counts in one")
    model_name = model_registry.default_for(data.kind) if model is None else model
    model_instance = model_registry.create(model_name, n_components, a0=a0, b0=b0)
    from lpviz._validate import warn_components

    warn_components(data, n_components)
    if inference != "vi" and not splits_over_machines(model_instance):
        splitting = [name for name, model_class in model_registry.MODELS.items() if splits_over_machines(model_class)]
        raise ValueError(
            f"model={model_instance.name!r} does not split over machines yet (only {', '.join(splitting)}); "
            "fit it in one process (drop scheduler=)"
        )
    method_options = {key: value for key, value in options.items() if value is not None}
    if inference == "vi":
        from lpviz.vi import DEFAULT_TOL, check_tol, vi_method

        if not splits_variational(model_instance):
            splitting = [name for name, model_class in model_registry.MODELS.items() if splits_variational(model_class)]
            raise ValueError(
                f"model={model_instance.name!r} has no variational fit over machines yet (only "
                f"{', '.join(splitting)}); fit it in one process (drop scheduler=) or use inference='mcmc'"
            )
        if burn_in is not None:
            raise ValueError("inference='vi' has no burn-in: drop burn_in (n_iter is the most iterations it runs)")
        tol = DEFAULT_TOL if tol is None else check_tol(tol)
        method_instance = vi_method(method, **method_options)
    elif inference != "mcmc":
        raise ValueError(f"inference must be 'mcmc' or 'vi', got {inference!r}")
    else:
        from lpviz.vi import check_options

        if tol is not None:
            raise ValueError("tol sets a variational fit: use with inference='vi'")
        check_options(method, "mcmc", **method_options)  # e.g. bessel_point: one clear line
        method_instance = method_registry.create(method, **method_options)
    if inference == "mcmc" and method_instance.settings.get("sampler") == "bessel":
        raise ValueError(
            "the Bessel sampler draws its starting noise rates from one stream over every cell, so its chain "
            "does not split over machines; use sampler='collapsed' (the default) with scheduler="
        )
    excluded = heldout = zeros = None
    if data.heldout is not None or data.structural_zeros is not None:
        # phi's rate sums over the observed rows and the excluded cells' rate pass through the workers
        # in row order (the models' rows_pass or vi_rows_pass, update_columns_excluded, excluded_rate_from)
        zeros = data.structural_zeros
        excluded = _either(data.heldout, zeros)
        # the model's own zeros (the block model's self loops): its partitions leave them out themselves
        # (structural_zeros_of_rows), as one process does; only the other excluded cells need the passes
        model_zeros = model_instance.structural_zeros(tuple(data.shape))
        if model_zeros is not None:
            zeros = _either(zeros, model_zeros)
            excluded[model_zeros] = False  # (no negated copy of a rows x columns mask)
            excluded = excluded if excluded.any() else None
        del model_zeros  # not kept through the fit (a byte a cell on the driver)
        hook = "vi_rows_pass" if inference == "vi" else "update_columns_excluded"
        if excluded is not None and not callable(getattr(model_instance, hook, None)):
            raise ValueError(
                f"this release has held-out cells or structural zeros, which a fit of model={model_instance.name!r} "
                f"over a cluster does not leave out yet (it lacks {hook}): fit it in one process (drop scheduler=)"
            )
        heldout = _either(data.heldout)
        if heldout is not None and zeros is not None:
            heldout &= ~zeros
        if heldout is not None and not heldout.any():
            heldout = None
    model_instance.check_shape(data.shape)
    if inference == "mcmc":
        n_iter, burn_in, thin = _schedule(n_iter, burn_in, thin)
    else:
        n_iter = check_count("n_iter", n_iter, 1)
    if getattr(data, "builds_rows", False):  # generated on the workers: send descriptions, not rows
        counts = RowsOf(data, "Y" if method_instance.uses_truth else "Y_obs")
    elif method_instance.uses_truth:
        if truth is None:
            raise ValueError(f"method={method_instance.name!r} fits the true counts: pass truth=Truth(Y)")
        counts = truth.Y if isinstance(truth, Truth) else np.asarray(truth)
    else:
        counts = data.Y_obs
    if not method_instance.needs_alpha:
        alpha = None
    else:
        alpha = RowsOf(data, "alpha") if isinstance(counts, RowsOf) else data.alpha_per_row
    shape = tuple(data.shape)
    chain_seed = chain_seed_from(random_state)
    checkpoint_every = int(checkpoint_every)
    if checkpoint_every < 1:
        raise ValueError(f"checkpoint_every must be at least 1, got {checkpoint_every}")
    if checkpoint is not None and not os.path.isdir(checkpoint):
        raise FileNotFoundError(f"checkpoint folder {checkpoint!r} does not exist; create it first")
    # one fit at a time writes a checkpoint folder (LOCK, removed when the fit ends)
    lock = _CheckpointLock(checkpoint) if checkpoint is not None else None
    try:
        saved_state = None
        if resume:
            saved_state = _read_checkpoint(
                checkpoint, chain_seed, shape, n_iter, inference, _shared_shapes(model_instance, shape)
            )
        client, owned = connect(scheduler or os.environ.get(SCHEDULER_ENV), timeout)
        if inference == "vi":
            try:  # everything the posterior holds is gathered at the end: the partitions go with the fit
                return _run_variational(
                    client, counts, alpha, model_instance, method_instance, method_options, shape, n_iter, tol,
                    chain_seed, parallel, callback, workers, (excluded, heldout, zeros),
                    (checkpoint, checkpoint_every, saved_state),
                )  # fmt: skip
            finally:
                if owned:
                    client.close()
        try:
            posterior = _run(
                client,
                counts,
                alpha,
                model_instance,
                method_instance,
                method_options,
                shape,
                n_iter,
                burn_in,
                thin,
                chain_seed,
                parallel,
                callback,
                workers,
                (checkpoint, checkpoint_every, saved_state),
                (excluded, heldout, zeros),
            )
        except BaseException:
            if owned:
                client.close()
            raise
        if owned:  # the workers keep theta and the rates while the posterior lives: close the client then
            posterior._finalizer = weakref.finalize(posterior, client.close)
        return posterior
    finally:
        if lock is not None:
            lock.release()


def partition_bytes(
    model,
    method,
    shape,
    rows,
    saved,
    *,
    extra=0,
    masked=False,
    threads=1,
    parallel=None,
    itemsize=None,
    positive=None,
    variational=False,
):
    """Bytes a partition of ``rows`` of a chain over a cluster holds on its worker at its peak:
    the chain's own (:func:`lpviz.engine.chain_bytes` of its rows), theta's ``saved`` samples
    (``extra``: bytes per row and component of the rows' own factor beyond them, e.g. a variational
    fit's q of theta), the rows' rate sum (a release small enough for the dense running mean), the
    excluded cells' mask (``masked``), the shared factors twice (the state and each call's copy;
    ``variational``: their q, six arrays each, :class:`VariationalPartition`) and, for the score on
    the low-rank path, every saved sample's; and the model's own (``split_worker_bytes(shape,
    rows, n_chunks, dense_mean, variational)``: e.g. the block model's n_recv parts, every actor x C
    integers per chunk of the sweep, and a saved sample's rates of every actor, n x n). ``threads``:
    the worker's kernel threads (the sweep's chunks, as :func:`lpviz._parallel.chunk_bounds` cuts them)."""
    from lpviz._parallel import _CHUNKS_PER_THREAD, PARALLEL_MIN_CELLS
    from lpviz.engine import chain_bytes

    n_cols = math.prod(shape[1:])
    dense_mean = math.prod(shape) <= DENSE_MEAN_MAX_CELLS  # as _start_partitions' spec decides it
    # itemsize: the counts'; positive: the rows' positive cells (Method.positive_cells; None: unknown)
    need = chain_bytes(model, method, (rows, *shape[1:]), itemsize, positive, variational)
    need += (saved * 8 + extra) * _row_width(model) * rows
    if not variational:  # theta's log prior term by term, kept from the score to the pass (Partition.score)
        need += 8 * _row_width(model) * rows
    if dense_mean and not variational:  # a CAVI partition keeps no rate sum
        need += 8 * rows * n_cols
    if masked:  # the excluded cells' mask (bool) and their lists
        need += rows * n_cols
    shared = 8 * sum(math.prod(factor) for factor in _shared_shapes(model, shape))
    # a variational partition holds the shared factors' q (shape, rate, mean, var, geo, elog): each
    # call's (shape, rate) become the new q's, built after the previous q is let go
    need += (6 if variational else 2) * shared + (0 if dense_mean else saved * shared)
    own = getattr(model, "split_worker_bytes", None)
    if own is not None:
        sweeps_in_chunks = parallel if parallel is not None else rows * n_cols >= PARALLEL_MIN_CELLS
        n_chunks = max(1, min(n_stream_blocks(rows), _CHUNKS_PER_THREAD * threads)) if sweeps_in_chunks else 1
        need += own(shape, rows, n_chunks, dense_mean, variational)
    return int(need)


# What a worker's process comes to hold beside a chain's arrays once the chain runs there (lpviz's
# modules and Numba's compiled kernels): 100 MiB measured on a LocalCluster worker between the memory
# check's question and the end of a topic chain (167 -> 268 MiB); the other models' kernels take room too.
WORKER_RUNTIME_BYTES = 256 * 2**20


def _worker_facts():
    """On a worker: its kernel threads, its process's memory now, and the fraction of its memory
    limit at which a nanny restarts it (Dask's ``distributed.worker.memory.terminate``; None: never)."""
    import dask
    import psutil

    from lpviz._parallel import n_threads

    terminate = dask.config.get("distributed.worker.memory.terminate", None)
    return n_threads(), psutil.Process().memory_info().rss, float(terminate) if terminate else None


def _worker_room(client, workers):
    """``{address: (threads, usable bytes, words)}``, asked before any data moves. A worker whose nanny
    restarts it at a fraction of its memory limit (Dask's default, 95%) can give a chain that
    fraction of its limit less its process's memory now and :data:`WORKER_RUNTIME_BYTES`: a chain
    the whole limit holds was restarted in its second iteration (1,000,000 x 5,000 on two 7 GiB
    workers, 6.5 GiB counted). A worker without a nanny, or one that cannot say, is offered its limit."""
    from lpviz._parallel import n_threads
    from lpviz.budget import format_bytes

    info = cluster_workers(client)
    limits = _worker_memory(client)
    if not any(limits.get(address) for address in workers):
        return {address: (n_threads(), 0, "") for address in workers}
    try:
        facts = client.run(_worker_facts, workers=list(workers))
    except Exception:  # a worker that cannot say: the driver's thread count, its whole limit
        facts = {}
    room = {}
    for address in workers:
        limit = limits.get(address, 0)
        threads, memory, terminate = facts.get(address, (n_threads(), 0, None))
        if limit and terminate and info.get(address, {}).get("nanny"):
            usable = int(terminate * limit) - memory - WORKER_RUNTIME_BYTES
            words = (
                f"; its nanny restarts it at {terminate:.0%} of that, and it holds {format_bytes(memory)} already "
                f"(about {format_bytes(WORKER_RUNTIME_BYTES)} more once the chain's kernels run): "
                f"{format_bytes(max(0, usable))} for the chain"
            )
            room[address] = (int(threads), usable, words)
        else:
            room[address] = (int(threads), limit, "")
    return room


def _check_worker_memory(client, workers, partitions, model, method, shape, n_iter, burn_in, thin, extra=0,
                         masked=False, parallel=None, itemsize=None, positive=None, variational=False):  # fmt: skip
    """Refuse before any data moves a chain whose largest partition does not fit its worker
    (:func:`partition_bytes` against :func:`_worker_room`; ``positive``: a partition's positive
    cells, a list beside ``partitions``). Returns, beside ``partitions``, the most positive cells
    each worker's room leaves room for (the count and the spare bytes at 16 a cell; None: not
    counted, or no limit)."""
    from lpviz.budget import MemoryBudgetError, format_bytes

    limits = _worker_memory(client)
    rooms = _worker_room(client, workers)
    saved = max(0, n_iter - burn_in) // max(1, thin)
    positive = [None] * len(partitions) if positive is None else positive
    room = []
    for address, (start, stop), cells in zip(workers, partitions, positive, strict=True):
        rows = stop - start
        threads, usable, words = rooms[address]
        need = partition_bytes(model, method, shape, rows, saved, extra=extra, masked=masked,
                               threads=threads, parallel=parallel, itemsize=itemsize, positive=cells,
                               variational=variational)  # fmt: skip
        limit = limits.get(address, 0)
        if limit and need > usable:
            raise MemoryBudgetError(
                f"a partition of {rows:,} rows needs about {format_bytes(need)} on worker {address}, "
                f"whose memory limit is {format_bytes(limit)}{words}. Add workers or give each more memory "
                "(dask worker --memory-limit), or fit fewer rows."
            )
        room.append(None if cells is None or not limit else cells + (usable - need) // 16)
    return room


def _pick_workers(client, chosen):
    available = sorted(cluster_workers(client))
    if not available:
        raise SchedulerUnreachable("the Dask scheduler has no workers; start some (`dask worker ADDRESS`)")
    if chosen is None:
        return available
    if isinstance(chosen, int):
        if not 1 <= chosen <= len(available):
            raise ValueError(f"workers={chosen} but the cluster has {len(available)}; ask for 1 to {len(available)}")
        return available[:chosen]
    unknown = [address for address in chosen if address not in available]
    if unknown:
        raise ValueError(f"no worker {unknown[0]!r} in the cluster; its workers: {', '.join(available)}")
    return list(chosen)


def _checkpoints_in(folder):
    """The checkpoints' folders in ``folder`` (names as the chain writes them), sorted."""
    try:
        return sorted(name for name in os.listdir(folder) if _CHECKPOINT_NAME.fullmatch(name))
    except OSError:
        return []


def _latest_checkpoint(folder):
    """The folder of the checkpoint ``folder``'s LATEST names, refused in words unless LATEST names a
    checkpoint inside ``folder`` as the chain writes it: a plain ``iteration-N`` (no separator, no
    ``..``, no absolute path), an existing folder and no symbolic link leading out of ``folder``."""
    from lpviz._files import open_input

    latest = os.path.join(folder, "LATEST")
    found = _checkpoints_in(folder)
    named = f" (it holds {', '.join(repr(name) for name in found[-3:])})" if found else ""
    write = f"write the checkpoint's name ('{found[-1]}') into LATEST" if found else "put the checkpoint back"
    if not os.path.lexists(latest):
        raise FileNotFoundError(
            f"no checkpoint in {folder!r} (no LATEST file){named}: the chain saved none there; run without "
            "resume=True to start it, or give checkpoint= the folder the chain saved its state in"
        )
    with open_input(latest, what="LATEST file", fix=CHECKPOINT_FIX) as handle:
        raw = handle.read(_LATEST_BYTES + 1)
    try:
        name = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        name = None
    if name is None or len(raw) > _LATEST_BYTES:
        reason = "is not one short line of text"
    elif os.path.isabs(name) or name.startswith("~"):
        reason = f"names {name[:80]!r}, an absolute path"
    elif "/" in name or "\\" in name or os.sep in name:
        reason = f"names {name[:80]!r}, a path (it holds a separator)"
    elif ".." in name:
        reason = f"names {name[:80]!r}, which leads out of the folder ('..')"
    elif not _CHECKPOINT_NAME.fullmatch(name):
        reason = f"names {name[:80]!r}, which is not a checkpoint's name"
    else:
        reason = None
    if reason is not None:
        raise ValueError(
            f"{latest}: {reason}; LATEST must name a checkpoint inside {folder!r} as the chain writes it "
            f"(a plain iteration-N, e.g. 'iteration-000000006'){named}: {write}, or run without resume=True "
            "to start the chain again"
        )
    target = os.path.join(folder, name)
    if not os.path.lexists(target):
        raise FileNotFoundError(
            f"{latest} names the checkpoint {name!r}, but {target!r} does not exist (removed or moved){named}; "
            f"{write}, or run without resume=True to start the chain again"
        )
    real = os.path.realpath(target)
    if os.path.dirname(real) != os.path.realpath(folder):
        raise ValueError(
            f"{target!r} is a symbolic link to {real!r}, outside the checkpoint folder {folder!r}; a checkpoint "
            "is read only from inside its folder: copy it in, or run without resume=True to start the chain again"
        )
    if not os.path.isdir(real):
        raise ValueError(f"{target!r} is not a folder, so not a checkpoint; {CHECKPOINT_FIX}")
    return target


def _inside(path, folder):
    """Refuse ``path`` if it is a symbolic link leading out of ``folder`` (the checkpoint's)."""
    real = os.path.realpath(path)
    if os.path.lexists(path) and os.path.dirname(real) != os.path.realpath(folder):
        raise ValueError(
            f"{path!r} is a symbolic link to {real!r}, outside its checkpoint {folder!r}; a checkpoint's files "
            f"are read only from inside it; {CHECKPOINT_FIX}"
        )
    return path


def _driver_members(archive, inference, iteration, n_saved, shared_shapes):
    """The members (shape, dtype kinds) of the driver file of a checkpoint of ``iteration`` with
    ``n_saved`` saved samples (:func:`_save_checkpoint`), the scalars read already among them."""
    expected = {
        "format": ((), "U"),
        "checkpoint_id": ((), "U"),
        "inference": ((), "U"),
        "iteration": ((), "iu"),
        "chain_seed": ((), "iu"),
        "shape": (archive.header("shape").shape, "iu"),
        "n_shared": ((), "iu"),
        "partitions": (archive.header("partitions").shape, "iu"),
        "log_joint": ((iteration,), "f"),
        "log_marginal": ((iteration,), "f"),
        "seconds": ((iteration,), "f"),
        "saved_iterations": ((n_saved,), "iu"),
        "saved_log_joint": ((n_saved if inference == "mcmc" else 0,), "f"),
    }
    if inference == "mcmc":
        for g, factor in enumerate(shared_shapes):
            expected[f"shared_{g}"] = (tuple(factor), "f")
            expected[f"shared_samples_{g}"] = ((n_saved, *factor), "f")
    else:
        expected.update(elbo_change=((), "f"), converged=((), "b"), elbo=((iteration,), "f"))
        expected["bytes_moved"] = ((iteration,), "iu")
        for g, factor in enumerate(shared_shapes):
            expected.update({f"shared_q_{g}_{i}": (tuple(factor), "f") for i in range(6)})
    return expected


def _read_checkpoint(folder, seed, shape, n_iter, inference="mcmc", shared_shapes=None):
    """The driver's part of the last checkpoint in ``folder`` (refusing one of another chain), read
    by the bounded reader, and its parts checked to be the checkpoint's, each and all: the driver
    file's id, chain seed, iteration and number of parts in every part, the parts' rows tiling the
    release, no part missing and none extra. ``shared_shapes``: the shared factors' shapes."""
    if folder is None:
        raise ValueError("resume=True needs checkpoint=FOLDER, the folder the chain saved its state in")
    folder = os.fspath(folder)
    target = _latest_checkpoint(folder)
    path = _inside(os.path.join(target, "driver.npz"), target)
    with _NPY_READ_LOCK, _open_checkpoint_file(path, "checkpoint driver file") as archive:
        if "format" not in archive or "checkpoint_id" not in archive:
            raise archive.error(
                "was written by an older lpviz, whose checkpoints do not bind their parts together (a part of "
                "another checkpoint would resume silently); run without resume=True to start the chain again"
            )
        written = archive.read_text("format", max_chars=64)
        if written != CHECKPOINT_FORMAT:
            raise archive.error(
                f"is a checkpoint of format {written[:40]!r}, not {CHECKPOINT_FORMAT!r}; {CHECKPOINT_FIX}"
            )
        saved = archive.read_text("inference", max_chars=8)
        if saved != inference:
            raise ValueError(
                f"the checkpoint in {folder!r} is of inference={saved!r}, not {inference!r}; resume with the "
                "arguments of the fit that wrote it, or choose another folder"
            )
        for key, ndim in (("shape", 1), ("partitions", 2), ("saved_iterations", 1)):
            if key not in archive or archive.header(key).ndim != ndim or archive.header(key).dtype.kind not in "iu":
                raise archive.error(f"has no member {key!r} of integers (a checkpoint has one); {CHECKPOINT_FIX}")
        saved_shape = tuple(int(n) for n in archive.read("shape")) if archive.header("shape").size <= 32 else ()
        iteration = archive.read_scalar("iteration", "iu")
        if archive.read_scalar("chain_seed", "iu") != seed or saved_shape != tuple(shape):
            raise ValueError(
                f"the checkpoint in {folder!r} is of another chain (seed or shape differ); resume with the "
                "arguments of the chain that wrote it, or choose another folder"
            )
        if iteration > n_iter:
            raise ValueError(f"the checkpoint is at iteration {iteration}, past n_iter = {n_iter}")
        if iteration < 1:
            raise archive.error(f"is at iteration {iteration}, which no checkpoint is; {CHECKPOINT_FIX}")
        shared_shapes = tuple(shared_shapes or ())
        if archive.read_scalar("n_shared", "iu") != (len(shared_shapes) if inference == "mcmc" else 0):
            raise archive.error(f"holds another model's shared factors; {CHECKPOINT_FIX}")
        n_saved = archive.header("saved_iterations").shape[0]
        if n_saved > iteration or (inference == "vi" and n_saved != 1):
            raise archive.error(f"records {n_saved:,} saved samples at iteration {iteration:,}; {CHECKPOINT_FIX}")
        n_parts = archive.header("partitions").shape[0]
        if archive.header("partitions").shape[1:] != (2,) or not 1 <= n_parts <= max(1, n_stream_blocks(shape[0])):
            raise archive.error(f"records {n_parts:,} partitions of the release's rows; {CHECKPOINT_FIX}")
        expected = _driver_members(archive, inference, iteration, n_saved, shared_shapes)
        _check_members(archive, expected)
        state = {key: archive.read(key) for key in expected}
    saved_iterations = state["saved_iterations"]
    if n_saved and (
        np.any(np.diff(saved_iterations) <= 0) or saved_iterations[0] < 1 or saved_iterations[-1] > iteration
    ):
        raise ValueError(f"{path}: its saved iterations are not iterations of its chain; {CHECKPOINT_FIX}")
    parts = [(int(start), int(stop)) for start, stop in state["partitions"]]
    ends = [0] + [stop for _, stop in parts]
    if [start for start, _ in parts] != ends[:-1] or ends[-1] != shape[0] or any(a >= b for a, b in parts):
        shown = ", ".join(f"{a:,}-{b:,}" for a, b in parts[:4]) + (", ..." if len(parts) > 4 else "")
        raise ValueError(
            f"{path}: its partitions ({shown}) do not tile the release's {shape[0]:,} rows; {CHECKPOINT_FIX}"
        )
    stamp = {
        "id": str(state["checkpoint_id"]),
        "seed": seed,
        "iteration": iteration,
        "n_parts": len(parts),
        "n_samples": n_saved,
    }
    _check_parts(target, parts, stamp)
    state["folder"], state["stamp"] = target, stamp
    state["inference"] = str(state["inference"])
    return state


def _check_parts(target, parts, stamp):
    """Refuse the checkpoint in ``target`` unless its parts are ``parts`` exactly (no part missing,
    none extra) and each is stamped with ``stamp`` (read from its small members only)."""
    expected = {os.path.basename(_part_path(target, start, stop)): (start, stop) for start, stop in parts}
    try:
        present = set(os.listdir(target))
    except OSError as error:
        from lpviz._files import clear_os_error

        raise clear_os_error(error, target) from None
    extra = sorted(name for name in present if name.startswith("rows-") and name not in expected)
    if extra:
        raise ValueError(
            f"{os.path.join(target, extra[0])}: is not a part of this checkpoint (its driver file has "
            f"{len(parts):,} parts: {', '.join(sorted(expected)[:3])}{', ...' if len(parts) > 3 else ''}); "
            f"remove it, or {CHECKPOINT_FIX}"
        )
    for name, (start, stop) in expected.items():
        path = os.path.join(target, name)
        if name not in present:
            raise FileNotFoundError(
                f"{path}: the checkpoint's part of rows {start:,}-{stop:,} is missing (its driver file has "
                f"{len(parts):,} parts); {CHECKPOINT_FIX}"
            )
        with _NPY_READ_LOCK, _open_checkpoint_file(_inside(path, target), "checkpoint part") as archive:
            _check_stamp(archive, stamp, start, stop)


LOCK_NAME = "LOCK"
_LOCK_BYTES = 4096


class _CheckpointLock:
    """The file ``LOCK`` in a checkpoint folder while a fit writes (or resumes from) it: created
    exclusively (O_EXCL, which shared storage keeps atomic too), naming the process, its machine
    and when it started; removed when the fit ends. A second fit on the folder is refused naming
    the first (two fits saving into one folder removed each other's checkpoints and overwrote
    LATEST: whichever saved last won, whatever chain the folder's resume then expected; issue 58).
    A lock left by a process of this machine that is gone (killed) is taken over."""

    def __init__(self, folder):
        self.path = os.path.join(os.fspath(folder), LOCK_NAME)
        self.ident = secrets.token_hex(8)
        record = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time(), "id": self.ident}
        self.text = json.dumps(record)
        for _ in range(3):
            try:
                descriptor = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                if self._stale():
                    with contextlib.suppress(FileNotFoundError):
                        os.remove(self.path)
                    continue
                raise self._refusal() from None
            with os.fdopen(descriptor, "w") as handle:
                handle.write(self.text)
            return
        raise self._refusal()

    def _holder(self):
        try:
            with open(self.path, "rb") as handle:
                record = json.loads(handle.read(_LOCK_BYTES).decode("utf-8"))
            return record if isinstance(record, dict) else None
        except (OSError, ValueError):
            return None

    def _stale(self):
        holder = self._holder()
        if holder is None or holder.get("host") != socket.gethostname() or not isinstance(holder.get("pid"), int):
            return False
        try:
            os.kill(holder["pid"], 0)
        except ProcessLookupError:
            return True
        except OSError:  # alive, another user's
            return False
        return False

    def _refusal(self):
        holder = self._holder()
        if holder is None:
            who = "a fit (its lock file holds no record lpviz wrote)"
        else:
            started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(holder.get("started", 0) or 0)))
            who = f"another fit: process {holder.get('pid')} on {str(holder.get('host'))[:64]!r}, started {started}"
        return ValueError(
            f"the checkpoint folder {os.path.dirname(self.path)!r} is in use by {who} (its lock file {self.path}); "
            "two fits writing one folder would mix their checkpoints: wait for that fit to end, give this one "
            "another checkpoint folder, or, if that fit is gone, remove the lock file"
        )

    def release(self):
        """Remove the lock file if it still is this fit's."""
        holder = self._holder()
        if holder is not None and holder.get("id") == self.ident:
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.path)


def _save_checkpoint(folder, iteration, seed, shape, shared, posterior, actors, variational=None):
    """Every partition's state, then the driver's, in a hidden staging folder, renamed
    ``iteration-N`` once whole; then LATEST names it; then the previous one goes (atomic: a chain
    stopped in the middle, by a signal or a lost machine, leaves the last checkpoint whole and no
    half-written ``iteration-N`` behind: a resumed run saving that iteration again once wrote into
    the half-written folder, whose parts of another number of workers then made its checkpoint
    refused; issue 58). ``variational``: a CAVI fit's driver arrays (its partitions save with
    ``vi_save``)."""
    import shutil

    from lpviz._files import atomic_write

    name = f"iteration-{iteration:09d}"
    target = os.path.join(folder, name)
    staging = os.path.join(folder, f".{name}.{secrets.token_hex(4)}.tmp")
    os.mkdir(staging)
    # the id every part records: a part of another checkpoint (another run's, of another iteration or
    # another chain) is refused on resume (_check_stamp)
    stamp = {"id": secrets.token_hex(16), "seed": seed, "iteration": iteration, "n_parts": len(actors)}
    try:
        _write_checkpoint(staging, iteration, seed, shape, shared, posterior, actors, variational, stamp)
        if os.path.lexists(target):  # an earlier run's checkpoint of this iteration (a fresh chain's)
            os.rename(target, os.path.join(folder, f".{name}.{secrets.token_hex(4)}.old"))
        os.rename(staging, target)
    except BaseException as error:
        shutil.rmtree(staging, ignore_errors=True)
        if isinstance(error, Exception) and _is_lost_worker(error):
            # a worker killed while it wrote its part: the last whole checkpoint is the one before
            whole = [entry for entry in _checkpoints_in(folder) if entry != name]
            last = int(whole[-1].split("-")[1]) if whole else 0
            what = "chain" if variational is None else "fit"
            raise WorkerLost(_lost_message(what, iteration, error, folder, last=last, writing=True)) from None
        raise
    atomic_write(os.path.join(folder, "LATEST"), lambda handle: handle.write(name.encode()))
    for entry in os.listdir(folder):  # the previous checkpoint, and what stopped runs left half-written
        if (entry.startswith("iteration-") and entry != name) or _STAGING.fullmatch(entry):
            shutil.rmtree(os.path.join(folder, entry), ignore_errors=True)


def _write_checkpoint(target, iteration, seed, shape, shared, posterior, actors, variational, stamp):
    """The checkpoint's files into the (staging) folder ``target``: every partition's, then the driver's."""
    from lpviz._files import atomic_write

    for future in [(actor.save if variational is None else actor.vi_save)(target, stamp) for actor in actors]:
        future.result()
    arrays = {
        "format": np.asarray(CHECKPOINT_FORMAT),
        "checkpoint_id": np.asarray(stamp["id"]),
        "inference": np.asarray("mcmc" if variational is None else "vi"),
        "iteration": np.asarray(iteration),
        "chain_seed": np.asarray(seed),
        "shape": np.asarray(shape),
        "n_shared": np.asarray(len(shared)),
        "partitions": np.asarray(posterior.partitions),
        "log_joint": np.asarray(posterior._log_joint, dtype=float),
        "log_marginal": np.asarray(posterior._log_marginal, dtype=float),
        "seconds": np.asarray(posterior._seconds, dtype=float),
        "saved_iterations": np.asarray(posterior.saved_iterations, dtype=np.int64),
        "saved_log_joint": np.asarray(getattr(posterior, "saved_log_joint", ()), dtype=float),
    }
    for g, factor in enumerate(shared):  # each shared factor now and at every saved sample
        arrays[f"shared_{g}"] = factor
        arrays[f"shared_samples_{g}"] = np.asarray([sample[g] for sample in posterior.shared_samples]).reshape(
            -1, *factor.shape
        )
    if variational is not None:
        arrays.update(variational, elbo=np.asarray(posterior.elbo, dtype=float))
        arrays["bytes_moved"] = np.asarray(posterior.bytes_moved, dtype=np.int64)
    atomic_write(os.path.join(target, "driver.npz"), lambda handle: np.savez(handle, **arrays))


def _start_partitions(
    client, counts, alpha, model, method, method_options, shape, seed, parallel, chosen, kind, sizes, mask=None
):
    """Send each worker its rows once (an actor of class ``kind`` holding them), then draw the
    start, theta (the first mode's factor) on the workers' rows and the shared factors here, from
    the chain seed's generator as one process draws them (``model.init_state``); returns
    ``(partitions, actors, shared)``. ``sizes``: (n_iter, burn_in, thin, bytes per row and
    component beyond a chain's) for the memory check; ``mask``: the excluded cells (rows x columns)."""
    n_rows = shape[0]
    n_cols = math.prod(shape[1:])  # the methods see the cells as a matrix of rows x (the other modes)
    workers = _pick_workers(client, chosen)
    partitions = partition_rows(n_rows, len(workers))
    workers = workers[: len(partitions)]
    positive = [_positive_cells(method, counts, start, stop) for start, stop in partitions]
    room = _check_worker_memory(
        client,
        workers,
        partitions,
        model,
        method,
        shape,
        *sizes,
        masked=mask is not None,
        parallel=parallel,
        itemsize=counts.sample_itemsize() if isinstance(counts, RowsOf) else count_itemsize(counts),
        positive=positive,
        variational=issubclass(kind, VariationalPartition),
    )
    spec = {
        "model": model.name,
        "n_components": model.n_components,
        "a0": model.a0,
        "b0": model.b0,
        "method": method.name,
        "options": method_options,
        "chain_seed": seed,
        "parallel": parallel,
        "dense_mean": n_rows * n_cols <= DENSE_MEAN_MAX_CELLS,
    }
    futures = []
    for address, (start, stop), cells in zip(workers, partitions, room, strict=True):
        piece, alpha_piece = _piece(counts, start, stop), _piece(alpha, start, stop)
        [piece_future] = client.scatter([piece], workers=[address])
        mask_piece = None if mask is None else client.scatter([_piece(mask, start, stop)], workers=[address])[0]
        future = client.submit(
            kind,
            # generated rows: the worker refuses them if they hold more positive cells than its limit holds
            dict(spec, rows=(start, stop), positive=cells if isinstance(counts, RowsOf) else None),
            piece_future,
            alpha_piece,
            mask_piece,
            actor=True,
            workers=[address],
            allow_other_workers=False,
            pure=False,
        )
        futures.append(future)
        del piece, piece_future, mask_piece
    actors = []
    for future in futures:  # every worker builds (or unpacks) its rows at once: waited for after all are sent
        actor = future.result()
        # an actor's handle calls through the process's default client: bind it to this fit's (the caller
        # may hold several clients, and a call through another cluster's never returns)
        actor._client, actor._future = client, future
        actors.append(actor)
    total = sum(actor.count_total().result() for actor in actors)
    rng = np.random.default_rng(seed)
    n_observed = sum(actor.observed().result() for actor in actors)  # the model's own zeros left out too
    level = model.start_level(mean_count_of(total, n_observed))
    for (start, stop), actor in zip(partitions, actors, strict=True):
        for first in range(start, stop, START_ROWS):
            rows = min(stop, first + START_ROWS) - first
            actor.set_theta(first - start, rng.gamma(1.0, level, (rows, _row_width(model)))).result()
    shared = tuple(rng.gamma(1.0, level, factor_shape) for factor_shape in _shared_shapes(model, shape))
    return partitions, actors, shared


def _run(
    client,
    counts,
    alpha,
    model,
    method,
    method_options,
    shape,
    n_iter,
    burn_in,
    thin,
    seed,
    parallel,
    callback,
    chosen,
    saving,
    masks=(None, None, None),
):
    excluded, heldout, zeros = masks  # excluded: held out or structural zeros (the chain leaves both out)
    partitions, actors, shared = _start_partitions(
        client, counts, alpha, model, method, method_options, shape, seed, parallel, chosen, Partition,
        (n_iter, burn_in, thin, 0), None if excluded is None else excluded.reshape(shape[0], -1),
    )  # fmt: skip
    n_rows, n_cols = shape[0], math.prod(shape[1:])
    folder, every, saved_state = saving
    if saved_state is not None:  # from the checkpoint, its rows cut as this cluster's partitions
        pieces = [(int(start), int(stop)) for start, stop in saved_state["partitions"]]
        for future in [actor.restore(saved_state["folder"], pieces, saved_state["stamp"]) for actor in actors]:
            future.result()
        shared = tuple(np.array(saved_state[f"shared_{g}"]) for g in range(int(saved_state["n_shared"])))
        done = int(saved_state["iteration"])
    else:
        done = 0
    for future in [actor.begin(shared) for actor in actors]:
        future.result()
    # the driver's state: one placeholder row for theta (the update of the shared factors reads theta
    # only through its column sums, which the partitions hand on) and the shared factors
    driver_state = (np.zeros((1, model.n_components)), *shared)
    column_work = _column_work(n_rows, n_cols, parallel, seed)
    posterior = DistributedPosterior(
        model, method, shape, burn_in=burn_in, thin=thin, partitions=partitions, actors=actors
    )
    posterior.heldout, posterior.structural_zeros = heldout, zeros  # for scoring, as the one-process chain's
    if saved_state is not None:
        posterior._log_joint = saved_state["log_joint"].tolist()
        posterior._log_marginal = saved_state["log_marginal"].tolist()
        posterior._seconds = saved_state["seconds"].tolist()
        posterior.saved_iterations = saved_state["saved_iterations"].tolist()
        posterior.saved_log_joint = saved_state["saved_log_joint"].tolist()
        posterior.shared_samples = [
            tuple(saved_state[f"shared_samples_{g}"][i].copy() for g in range(len(shared)))
            for i in range(len(posterior.saved_iterations))
        ]
    chain = (model, actors, posterior, shared, driver_state, column_work, excluded is not None)
    pending = None  # the iteration whose score runs in the next one's round (_one_iteration)
    for iteration in range(done + 1, n_iter + 1):
        checkpoint = folder is not None and iteration % every == 0
        try:
            pending = _one_iteration(chain, iteration, burn_in, thin, callback, pending)
            if checkpoint or iteration == n_iter:  # the iteration whole before it is saved or returned
                _finish_iteration(chain, pending, callback)
                pending = None
        except Exception as error:
            if not _is_lost_worker(error):
                raise
            raise WorkerLost(_lost_message("chain", iteration, error, folder, every)) from None
        if checkpoint:
            _save_checkpoint(folder, iteration, seed, shape, shared, posterior, actors)
    return posterior


def _run_variational(client, counts, alpha, model, method, method_options, shape, n_iter, tol, seed, parallel,
                     callback, chosen, masks=(None, None, None), saving=(None, 1, None)):  # fmt: skip
    """CAVI over the workers (:class:`VariationalPartition`): each iteration the driver sends the
    shared factors' q, each worker runs its rows' local step and theta's update and returns its
    allocated totals (integers); the running sums over rows pass through the workers in row order;
    the driver updates the shared factors' q with ``model.vi_update_columns``, the one-process fit's
    own call. The ELBO trace and every q equal the one-process fit's bit for bit."""
    from types import SimpleNamespace

    from lpviz.engine import VariationalPosterior
    from lpviz.vi import MIN_ITERATIONS, VariationalState

    n_rows, n_cols = shape[0], math.prod(shape[1:])
    K = model.n_components
    excluded, heldout, zeros = masks
    # theta's q on the workers: (shape, rate, mean, var, geo, elog) per row and component of its own
    partitions, actors, shared = _start_partitions(
        client, counts, alpha, model, method, method_options, shape, seed, parallel, chosen,
        VariationalPartition, (1, 1, 1, 6 * 8), None if excluded is None else excluded.reshape(n_rows, -1),
    )  # fmt: skip
    prior = (model.a0, model.b0)
    # the driver's q: a placeholder row for theta (phi's update reads theta through its row totals)
    q = (GammaFactor.around(np.ones((1, K)), VI_INIT_SHAPE, prior),
         *(GammaFactor.around(factor, VI_INIT_SHAPE, prior) for factor in shared))  # fmt: skip

    def shared_q():
        return tuple((factor.gamma_shape, factor.gamma_rate) for factor in q[1:])

    for future in [actor.vi_begin(shared_q()) for actor in actors]:
        future.result()
    folder, every, saved_state = saving
    if saved_state is not None:  # from the checkpoint, its rows cut as this cluster's partitions
        pieces = [(int(start), int(stop)) for start, stop in saved_state["partitions"]]
        for future in [actor.vi_restore(saved_state["folder"], pieces, saved_state["stamp"]) for actor in actors]:
            future.result()
        for g, factor in enumerate(q[1:]):  # the shared factors' q as the last update left them
            for i, array in enumerate(factor.arrays()):
                array[...] = saved_state[f"shared_q_{g}_{i}"]
    constant = 0.0
    for actor in actors:  # the cells' constant ELBO terms, in row order
        constant = actor.vi_constant_from(constant).result()
    column_work = _column_work(n_rows, n_cols, parallel, seed)
    posterior = VariationalPosterior(model, method, shape, heldout=heldout, structural_zeros=zeros)
    posterior.bytes_moved, posterior.partitions = [], partitions
    passes = []

    def through_rows(kind, carry, factors):
        """A sum over the excluded cells, through the workers in row order (``model.vi_rows_pass``)."""
        sent = {position: (factor.gamma_shape, factor.gamma_rate) for position, factor in factors.items()}
        for actor in actors:
            carry = actor.vi_rows_pass(kind, carry, sent).result()
        passes.append(len(actors) * (2 * _nbytes(carry) + _nbytes(sent)))
        return carry

    elbo, change, iteration, converged = math.nan, math.nan, 0, False
    if saved_state is not None:
        elbo, change = float(saved_state["elbo"][-1]), float(saved_state["elbo_change"])
        iteration, converged = int(saved_state["iteration"]), bool(saved_state["converged"])
        posterior._elbo = saved_state["elbo"].tolist()
        posterior._seconds = saved_state["seconds"].tolist()
        posterior._log_joint = [math.nan] * iteration
        posterior._log_marginal = [math.nan] * iteration
        posterior.bytes_moved = saved_state["bytes_moved"].tolist()
        posterior.converged = converged
    while iteration < n_iter and not converged:
        started = time.perf_counter()
        try:
            sent = shared_q()
            parts = [actor.vi_sweep(sent) for actor in actors]
            moved = len(actors) * _nbytes(sent)
            columns, bound = None, 0.0
            for future in parts:  # integers: their sum is exact in any order
                part, weights, part_bound = future.result()
                moved += _nbytes(part)
                columns = part if columns is None else tuple(a + b for a, b in zip(columns, part, strict=True))
                bound += part_bound
            check_fixed_bound(bound)
            carry = (model.vi_no_totals(), 0.0)
            for actor in actors:  # in row order: the one-process fit's additions
                carry = actor.vi_carry(carry).result()
            moved += 2 * len(actors) * _nbytes(carry)
        except Exception as error:
            if not _is_lost_worker(error):
                raise
            raise WorkerLost(_lost_message("fit", iteration + 1, error, folder, every)) from None
        totals, cells = carry
        passes.clear()
        factor_terms = model.vi_update_columns(q, tuple(fixed_total(c[None]) for c in columns), weights, totals,
                                               column_work, None if excluded is None else through_rows)  # fmt: skip
        moved += sum(passes)
        previous, elbo = elbo, float((cells - constant) + factor_terms)
        iteration += 1
        # as VariationalFit: the relative change, converged from MIN_ITERATIONS on
        change = abs(elbo - previous) / max(abs(elbo), 1e-300) if math.isfinite(previous) else math.nan
        converged = iteration >= MIN_ITERATIONS and change <= tol
        factors = model.vi_factors((SimpleNamespace(mean=np.zeros((0, K))), *q[1:]))
        if _row_width(model):  # theta stays on the workers (the block model's is the driver's)
            factors.pop(model.factor_names[0], None)
        state = VariationalState(
            iteration=iteration, seconds=time.perf_counter() - started, factors=factors, model=model.name,
            model_instance=model, elbo=elbo, elbo_change=change, converged=converged,
        )  # fmt: skip
        posterior.add(state)
        posterior.bytes_moved.append(moved)
        if callback is not None:
            callback(state)
        if folder is not None and iteration % every == 0:
            driver = {"elbo_change": np.asarray(change), "converged": np.asarray(converged)}
            for g, factor in enumerate(q[1:]):
                driver.update({f"shared_q_{g}_{i}": array for i, array in enumerate(factor.arrays())})
            _save_checkpoint(folder, iteration, seed, shape, (), posterior, actors, driver)
    # the fit's means: theta's gathered (rows x K), rates by row blocks as the one-process posterior's
    theta = np.vstack([actor.vi_means().result() for actor in actors])
    factors = model.vi_factors((SimpleNamespace(mean=theta), *q[1:]))
    posterior.samples, posterior.best = [factors], factors
    posterior.partitions = partitions
    return posterior


def _lost_message(what, iteration, error, folder, every=1, *, last=None, writing=False):
    """The words of :class:`WorkerLost`: where to resume from (the checkpoint ``last``, by default
    the last one before ``iteration``; ``writing``: the worker was lost while it wrote its part of
    the checkpoint of ``iteration``, which was therefore not made)."""
    if last is None:
        last = (iteration - 1) - (iteration - 1) % every if folder else 0
    hint = (
        f"resume from the checkpoint of iteration {last}: the same call with resume=True"
        if folder and last
        else "start it again (with checkpoint=FOLDER a lost worker costs at most checkpoint_every iterations)"
    )
    when = (
        f"while it wrote its part of the checkpoint of iteration {iteration}"
        if writing
        else f"during iteration {iteration}"
    )
    return f"a worker holding rows of the {what} was lost {when} ({type(error).__name__}); {hint}"


def _is_lost_worker(error):
    """Whether ``error`` (raised by an actor's call) means its worker is gone."""
    from distributed.comm.core import CommClosedError

    return isinstance(error, (CommClosedError, OSError)) or "lost" in str(error).lower()


def _one_iteration(chain, iteration, burn_in, thin, callback, pending=None):
    """One iteration of the chain over the workers (see the module's docstring): one round of
    :meth:`Partition.step` (the previous iteration's score, ``pending``, and this sweep: both at
    the previous draw), one pass in row order (the previous iteration's sums and theta's column
    sums), the previous iteration recorded (and ``callback``), then the shared factors' draw here.
    Returns this iteration's score, pending for the next call or :func:`_finish_iteration`. The
    draws are those of the one-process chain in its order: only the log joint of an iteration comes
    one sweep later. Its parts go to ``posterior.phases`` (seconds, :func:`_phases`) and
    ``posterior.part_bytes``."""
    model, actors, posterior, shared, driver_state, column_work, masked = chain
    W = len(actors)
    shared_bytes = sum(factor.nbytes for factor in shared)
    started = time.perf_counter()
    # rows: the previous score and this sweep, each partition at once
    count_parts = [actor.step(shared, iteration, None if pending is None else pending["save"]) for actor in actors]
    column_counts, worked, counts_bytes = None, [], 0
    for future in count_parts:  # integers: their sum is exact in any order
        part, seconds = future.result()
        worked.append(seconds)
        counts_bytes += _nbytes(part)
        column_counts = part if column_counts is None else _add_counts(column_counts, part)
    swept = time.perf_counter()
    totals = None if pending is None else (0.0, 0.0, {}, 0.0)
    theta_sum = np.zeros(model.n_components)
    for actor in actors:  # in row order: the one-process chain's additions
        totals, theta_sum = actor.pass_on(totals, theta_sum).result()
    hops = W
    pass_bytes = 2 * W * (theta_sum.nbytes + _nbytes(totals))
    summed = time.perf_counter()
    if pending is not None:  # the previous iteration's log joint, at the factors it drew (not yet redrawn)
        _record(chain, pending, totals, started, callback)
    passes = []

    def through_rows(kind, carry, factors):
        """A sum over the excluded cells (phi's rate sums; b's, c's excluded parts), row order."""
        for actor in actors:
            carry = actor.rows_pass(kind, carry, factors).result()
        passes.append((W, W * (2 * carry.nbytes + _nbytes(factors))))
        return carry

    # the shared factors, here, from the chain's own streams (drawn in place: ``shared`` is driver_state[1:])
    passed = time.perf_counter()
    if masked:  # excluded cells: their sums over rows pass through the workers as the draws need them
        model.update_columns_excluded(driver_state, column_counts, theta_sum, column_work, iteration, through_rows)
    else:
        model.update_columns(driver_state, column_counts, theta_sum, column_work, iteration)
    drawn = time.perf_counter()
    hops += sum(n for n, _ in passes)
    pass_bytes += sum(moved for _, moved in passes)
    part_bytes = {"shared": W * shared_bytes, "counts": counts_bytes, "passes": pass_bytes}
    scores, sweeps = zip(*worked, strict=True)
    busy = [score + sweep for score, sweep in worked]
    # the parts of this iteration's work (seconds): ``rows``, the workers' round on the driver's clock,
    # of which ``sweep`` and ``score`` are the slowest worker's own, ``wait`` the mean worker's idling
    # on the slowest and ``overhead`` what is neither (phi out, the counts back: the network and Dask);
    # ``passes``, the sums handed through the workers one after the other (``hops`` calls, ``hop``
    # seconds each); ``driver``, the shared factors' draw here (with its passes over excluded cells)
    parts = {
        "rows": swept - started,
        "sweep": max(sweeps),
        "score": max(scores),
        "wait": max(busy) - float(np.mean(busy)),
        "overhead": max(0.0, (swept - started) - max(busy)),
        "passes": summed - swept,
        "hops": hops,
        "hop": (summed - swept) / hops,
        "driver": drawn - passed,
    }
    save = iteration > burn_in and (iteration - burn_in) % thin == 0
    return {"iteration": iteration, "save": save, "theta_sum": theta_sum, "started": started, "parts": parts,
            "bytes": part_bytes}  # fmt: skip


def _finish_iteration(chain, pending, callback):
    """The score of ``pending`` (the iteration :func:`_one_iteration` left) and its sums, recorded:
    before a checkpoint and after the last iteration."""
    model, actors, posterior, shared, *_ = chain
    W = len(actors)
    began = time.perf_counter()
    scores = [future.result() for future in [actor.score(shared, pending["save"]) for actor in actors]]
    scored = time.perf_counter()
    totals = (0.0, 0.0, {}, 0.0)
    for actor in actors:
        totals = actor.carry(totals).result()
    carried = time.perf_counter()
    parts, moved = pending["parts"], pending["bytes"]  # this iteration's work: one round and one pass more
    parts["rows"] += scored - began
    parts["score"] += max(scores)
    parts["wait"] += max(scores) - float(np.mean(scores))
    parts["overhead"] += max(0.0, (scored - began) - max(scores))
    parts["passes"] += carried - scored
    parts["hops"] += W
    parts["hop"] = parts["passes"] / parts["hops"]
    moved["shared"] += W * sum(factor.nbytes for factor in shared)
    moved["passes"] += 2 * W * _nbytes(totals)
    _record(chain, pending, totals, None, callback)


def _record(chain, pending, totals, ended, callback):
    """Record iteration ``pending`` (its log joint from the sums ``totals`` handed through the rows)
    on the posterior, its seconds from its start to ``ended`` (None: now), and call ``callback``."""
    model, actors, posterior, shared, *_ = chain
    iteration, save, theta_sum = pending["iteration"], pending["save"], pending["theta_sum"]
    row_loglik, prior, terms, excluded = totals
    # the rate over the observed cells: every cell's less the excluded cells' (0 without them: the same bits)
    loglik = row_loglik - (model.observed_rate_of_sums(theta_sum, *shared) - excluded)
    for factor in shared:  # model.log_prior's additions: theta's, then each shared factor's
        prior = prior + gamma_log_prior(factor, model.a0, model.b0)
    log_joint = float(loglik + prior + terms.get("noise", 0.0))
    log_marginal = float(terms.get("log_marginal", math.nan))
    # its seconds: from its start to the next iteration's (whose sweep ran beside its score) or to now
    seconds = (time.perf_counter() if ended is None else ended) - pending["started"]
    kept = tuple(factor.copy() for factor in shared) if save else None
    posterior.record((log_joint, log_marginal, seconds), kept, iteration if save else None)
    posterior.bytes_moved.append(sum(pending["bytes"].values()))
    posterior.part_bytes.append(pending["bytes"])
    posterior.phases.append(pending["parts"])
    if callback is not None:  # as lpviz.fit's: the iteration's state (the shared factors: theta stays on the workers)
        factors = model.factors((np.zeros((0, model.n_components)), *shared))
        factors.pop(model.factor_names[0], None)
        callback(ChainState(iteration, log_joint=log_joint, seconds=seconds, factors=factors,
                            model=model.name, log_marginal=log_marginal))  # fmt: skip


def _add_counts(total, part):
    """Sum of two partitions' allocated counts (an array, or a tuple of arrays)."""
    if isinstance(total, tuple):
        return tuple(a + b for a, b in zip(total, part, strict=True))
    return total + part
