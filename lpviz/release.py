"""What the analyst holds (:class:`Release`) and, beside it, what only a simulation knows (:class:`Truth`).

A :class:`Release` is the noised counts and everything public about them:
the noise level (``alpha``, from ``epsilon`` and ``N``), which cells are held
out of the fit, which cells do not exist (a network's self loops), labels the
owner declared public, and whether the noise came from a seeded simulation.
Methods receive a release and nothing else; the truth (true counts, and true
rates when the data are simulated) travels beside it in a :class:`Truth`
and reaches only the non-private method and the scoring.

Release file schema (``.npz``, no pickles; :meth:`Release.save`,
:meth:`Release.load`, ``lpviz privatize``)::

    format          "lpviz-release-1"
    Y_obs           int (D, V) noised counts (0 at structural zeros); any order >= 2, e.g.
                    (I, J, T) sender x recipient x month
    alpha           float () or (D,): the noise level, per row (first-mode index) if heterogeneous
    epsilon, N      float (): NaN when the release was made from alpha alone
    kind            str: "documents" (documents x words), "network" (sender x recipient) or
                    "tensor" (an array of order >= 3)
    heldout         bool (Y_obs's shape), optional: cells held out of every fit
    structural_zeros bool (Y_obs's shape), optional: cells that do not exist (a network's diagonal)
    row_labels, col_labels  str (D,), (V,), optional: labels declared public (first, second mode)
    mode_labels_2, mode_labels_3, ...  str, optional: labels of the further modes (e.g. months)
    simulated       bool: True when the noise came from a seeded (reproducible) sampler
    noise_seed      int, optional: that seed, only when asked for (``save(noise_seed=True)``, ``lpviz
                    privatize --keep-noise-seed``): a simulation is invertible by whoever holds it
    name            str: the data set's name (never a file path)
"""

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from lpviz._validate import check_alpha as _check_alpha

KINDS = ("documents", "network", "tensor")
# The order (number of modes) of the data of each kind: None = 3 or more.
KIND_ORDERS = {"documents": 2, "network": 2, "tensor": None}
# What a row and a cell of each kind are, for texts on the guarantee (it is about rows: two rows whose
# counts differ by at most N in total; the noise is drawn for every cell); "{doc}": document or email.
KIND_UNITS = {
    "documents": dict(
        rows="{doc}s",
        row="one {doc}'s counts of every word",
        cell="one {doc}'s count of one word",
        units="words",
    ),
    "network": dict(
        rows="rows of the network (one sender's counts to every recipient)",
        row="one sender's emails to every recipient",
        cell="one sender's emails to one recipient",
        units="emails",
    ),
    "tensor": dict(
        rows="rows of the tensor (one sender's counts to every recipient in every month)",
        row="one sender's emails to every recipient in every month",
        cell="one sender's emails to one recipient in one month",
        units="emails",
    ),
}
RELEASE_FORMAT = "lpviz-release-1"

# The largest count, true or noised, any part of lpviz accepts: |count| <= MAX_COUNT. The samplers'
# work per cell grows like sqrt(count) where the noise is wide (alpha near 1: the Bessel route and
# the collapsed marginal sum ~9 sqrt(n) terms), and float64 stops counting one by one at 2**53 (a
# kernel's loop "y += 1.0" stands still there: the hang of issue 38). At 10**12 one cell costs
# ~25 ms at worst (alpha = 0.999999), at 2**53 - 1 ~2 s (benchmarks/bench_stop.py).
MAX_COUNT = 10**12
MAX_COUNT_TEXT = "10**12"
# Cells checked at a time: bounds the temporaries of the check whatever the size of the counts.
_BOUND_CHUNK = 1 << 20


def count_bound_problem(value):
    """The words for a count beyond :data:`MAX_COUNT` (for the caller's "where: ..." error)."""
    return (
        f"a count of {int(value):,}, beyond the largest count lpviz fits (|count| <= {MAX_COUNT_TEXT}); "
        "counts this large are not what Poisson factorization is for: rescale them (e.g. count in thousands)"
    )


def check_count_bound(values, what, position=None):
    """Raise a ValueError naming the first cell of ``values`` (any integer or float array) with
    ``|value| > MAX_COUNT``: ``"{what}, {position(index)}: ..."`` (default: the cell's index).

    Checked a chunk at a time, on the extremes of each chunk first, so nothing the size of the
    counts is allocated and counts within the bound cost two reductions."""
    values = np.asarray(values)
    if values.size == 0 or values.dtype.kind not in "iuf":
        return
    flat = values.reshape(-1)
    for start in range(0, flat.size, _BOUND_CHUNK):
        chunk = flat[start : start + _BOUND_CHUNK]
        low, high = chunk.min(), chunk.max()
        if high <= MAX_COUNT and (values.dtype.kind == "u" or low >= -MAX_COUNT):
            continue
        offset = int(np.flatnonzero((chunk > MAX_COUNT) | (chunk < -MAX_COUNT))[0])
        index = np.unravel_index(start + offset, values.shape)
        where = position(index) if position is not None else f"cell {tuple(int(i) for i in index)}"
        raise ValueError(f"{what}, {where}: {count_bound_problem(chunk[offset])}")


def summed_counts(matrix, what, position=None):
    """Any scipy sparse matrix of counts as CSR (int64) with repeated entries added up, exactly.

    The entries (each already within :data:`MAX_COUNT`) are added in float64 beside their
    magnitudes: while a cell's sum of magnitudes is at most MAX_COUNT < 2**53 every partial sum
    is a whole number float64 holds exactly, and beyond it rounding is monotone, so the sum of
    magnitudes exceeds MAX_COUNT exactly when the true one does (no int64 wrap to a negative
    count). A cell past the bound is a ValueError naming it (``position(row, col)``, default
    "cell (row, col)"). Explicit zeros are kept (an edge list counts its zero lines).
    """
    import scipy.sparse as sp

    coo = sp.coo_matrix(matrix)  # dok, lil, csc, bsr ... alike
    values = np.asarray(coo.data)
    check_count_bound(values, what)
    coords = (np.asarray(coo.row), np.asarray(coo.col))
    summed = sp.csr_matrix((values.astype(np.float64), coords), shape=coo.shape)
    summed.sum_duplicates()
    if values.dtype.kind == "u" or values.size == 0 or values.min() >= 0:
        magnitude = summed.data
    else:
        magnitude = sp.csr_matrix((np.abs(values.astype(np.float64)), coords), shape=coo.shape)
        magnitude.sum_duplicates()
        magnitude = magnitude.data
    beyond = magnitude > MAX_COUNT
    if beyond.any():
        entry = int(np.flatnonzero(beyond)[0])
        row = int(np.searchsorted(summed.indptr, entry, side="right")) - 1
        col = int(summed.indices[entry])
        where = position(row, col) if position is not None else f"cell ({row}, {col})"
        signed = "" if magnitude is summed.data else " in absolute value"
        raise ValueError(
            f"{what}, {where}: its repeated entries add up{signed} to more than {MAX_COUNT_TEXT} "
            f"(the largest count lpviz fits, |count| <= {MAX_COUNT_TEXT}); remove the repeated lines "
            "or rescale the counts"
        )
    return sp.csr_matrix((summed.data.astype(np.int64), summed.indices, summed.indptr), shape=coo.shape)


def _read_only(array, dtype=None):
    array = np.array(array, dtype=dtype, copy=True)
    array.setflags(write=False)
    return array


def smallest_int_dtype(values):
    """The smallest signed integer dtype that holds every entry of ``values`` and its
    absolute value (-128 is left out of int8, so ``abs`` never overflows)."""
    low, high = (int(values.min()), int(values.max())) if values.size else (0, 0)
    for dtype in (np.int8, np.int16, np.int32, np.int64):
        info = np.iinfo(dtype)
        if -info.max <= low and high <= info.max:
            return dtype
    return np.int64


def _check_cells(name, mask, shape):
    if mask is None:
        return None
    mask = np.asarray(mask)
    if mask.dtype != bool:
        raise TypeError(f"{name} must be a boolean array (True = {name.replace('_', ' ')}), got dtype {mask.dtype}")
    if mask.shape != tuple(shape):
        raise ValueError(f"{name} has shape {mask.shape} but Y_obs has shape {tuple(shape)}; they must match")
    return _read_only(mask) if mask.any() else None


def _check_labels(name, labels, n):
    if labels is None:
        return None
    from lpviz._files import decode_text

    labels = tuple(decode_text(label) for label in labels)
    if len(labels) != n:
        raise ValueError(f"{name} has {len(labels)} labels but the matrix has {n}; give one per {name[:3]}")
    return labels


def _check_level(epsilon, N, alpha):
    """epsilon and N, when recorded, must be the ones alpha came from: alpha = exp(-epsilon/N)."""
    if epsilon is None and N is None:
        return
    if epsilon is None or N is None:
        given, missing = ("epsilon", "N") if N is None else ("N", "epsilon")
        raise ValueError(f"the release records {given} without {missing}; alpha = exp(-epsilon/N) needs both")
    if not (math.isfinite(epsilon) and epsilon > 0 and math.isfinite(N) and N > 0):
        raise ValueError(f"epsilon = {epsilon!r} and N = {N!r} must be finite and > 0")
    expected = math.exp(-epsilon / N)
    recorded = np.asarray(alpha, dtype=np.float64)
    if not np.allclose(recorded, expected, rtol=1e-9, atol=0.0):
        shown = f"{float(recorded):.6g}" if recorded.ndim == 0 else f"per-row values from {recorded.min():.6g}"
        raise ValueError(
            f"epsilon = {epsilon:g} and N = {N:g} give alpha = exp(-epsilon/N) = {expected:.6g}, but the "
            f"release records alpha = {shown}: they contradict each other, so its noise level is unknown; "
            "make the release again (lpviz privatize)"
        )


def _check_mode_labels(mode_labels, shape):
    """One sequence of labels (or None) per mode after the second, or None."""
    if mode_labels is None:
        return None
    mode_labels = tuple(mode_labels)
    if len(mode_labels) != len(shape) - 2:
        raise ValueError(
            f"mode_labels has {len(mode_labels)} entries but the data have {len(shape) - 2} modes after "
            "the second; give one sequence of labels (or None) per further mode"
        )
    checked = tuple(
        None if labels is None else _check_labels(f"mode_labels[{m}]", labels, shape[m + 2])
        for m, labels in enumerate(mode_labels)
    )
    return None if all(labels is None for labels in checked) else checked


def check_kind(kind, shape):
    """Raise a ValueError unless ``kind`` is a data kind and data of ``shape`` can be of it."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(map(repr, KINDS))}; got {kind!r}")
    order = KIND_ORDERS[kind]
    if order is not None and len(shape) != order:
        raise ValueError(
            f"kind={kind!r} is a matrix, but the counts have shape {tuple(shape)}; an array of order "
            f"{len(shape)} is kind='tensor'"
        )
    if order is None and len(shape) < 3:
        raise ValueError(f"kind='tensor' needs an array of order 3 or more, got shape {tuple(shape)}")
    if kind == "network" and shape[0] != shape[1]:
        raise ValueError(f"a network must be square (senders x recipients), got shape {tuple(shape)}")


def kind_of(shape):
    """The kind data of ``shape`` are when nothing else is said: a matrix is "documents", an
    array of order 3 or more a "tensor"."""
    return "documents" if len(shape) == 2 else "tensor"


@dataclass(frozen=True, eq=False)
class Release:
    """Noised counts and what is public about them.

    Parameters
    ----------
    Y_obs : int array (n_rows, n_cols) or of any order >= 2, e.g. (I, J, T)
        The noised counts (may be negative).
    alpha : float or array (n_rows,)
        Noise level ``exp(-epsilon/N)`` of the two-sided geometric mechanism,
        one per row (first-mode index: a document, a sender) when owners chose their own.
    epsilon, N : float, optional
        The privacy level the release was made at (None when only alpha is known).
    kind : {"documents", "network", "tensor"}
        Documents x words, a square sender x recipient network, or an array of
        order >= 3 (e.g. sender x recipient x month). Default: "tensor" for an
        array of order >= 3, else "documents".
    heldout : bool array, optional
        True for cells held out of every fit (scored apart as held-out MAE).
    structural_zeros : bool array, optional
        True for cells that do not exist (never noised, fitted or scored);
        a network's diagonal when not given.
    row_labels, col_labels : sequences of str, optional
        Labels the owner declared public. Labels chosen or ordered by the
        true data (the most frequent words, the busiest senders) reveal it.
    mode_labels : sequence, optional
        Arrays of order >= 3: labels of each further mode (e.g. the months), or None.
    simulated : bool
        True when the noise came from a seeded sampler: a simulation, not a
        release (whoever knows the seed can subtract the noise).
    noise_seed : int, optional
        That seed.
    name : str
        The data set's name.
    """

    Y_obs: np.ndarray
    alpha: object
    epsilon: float | None = None
    N: float | None = None
    kind: str | None = None
    heldout: np.ndarray | None = None
    structural_zeros: np.ndarray | None = None
    row_labels: tuple | None = None
    col_labels: tuple | None = None
    simulated: bool = False
    noise_seed: int | None = None
    name: str = ""
    mode_labels: tuple | None = None

    def __post_init__(self):
        Y = np.asarray(self.Y_obs)
        if Y.ndim < 2:
            raise ValueError(
                f"Y_obs must be an array of noised counts with at least two modes (rows x columns), got shape {Y.shape}"
            )
        if Y.dtype == bool or Y.dtype.kind not in "iu":
            raise TypeError(f"Y_obs must hold integer counts, got dtype {Y.dtype}")
        if 0 in Y.shape:
            raise ValueError(f"Y_obs is empty (shape {Y.shape}); a release needs at least one row and one column")
        check_count_bound(Y, "Y_obs")  # before the copy below, and before a kernel loops on it
        kind = kind_of(Y.shape) if self.kind is None else self.kind
        check_kind(kind, Y.shape)
        alpha = _check_alpha(self.alpha)
        if alpha.ndim == 0:
            alpha = float(alpha)
        elif alpha.shape != (Y.shape[0],):
            raise ValueError(
                f"alpha must be a scalar or have one value per row ({Y.shape[0]}), got shape {alpha.shape}"
            )
        else:
            alpha = _read_only(alpha.astype(np.float64))
        structural = self.structural_zeros
        if structural is None and kind == "network":
            structural = np.eye(*Y.shape, dtype=bool)
        set_ = object.__setattr__
        # the smallest integer type: a 10,000 x 10,000 release of small counts is 100 MB, not 800 MB
        set_(self, "Y_obs", _read_only(Y, smallest_int_dtype(Y)))
        set_(self, "alpha", alpha)
        set_(self, "kind", kind)
        set_(self, "epsilon", None if self.epsilon is None else float(self.epsilon))
        set_(self, "N", None if self.N is None else float(self.N))
        _check_level(self.epsilon, self.N, alpha)
        set_(self, "heldout", _check_cells("heldout", self.heldout, Y.shape))
        set_(self, "structural_zeros", _check_cells("structural_zeros", structural, Y.shape))
        set_(self, "row_labels", _check_labels("row_labels", self.row_labels, Y.shape[0]))
        set_(self, "col_labels", _check_labels("col_labels", self.col_labels, Y.shape[1]))
        set_(self, "mode_labels", _check_mode_labels(self.mode_labels, Y.shape))
        set_(self, "simulated", bool(self.simulated))
        set_(self, "noise_seed", None if self.noise_seed is None else int(self.noise_seed))
        if self.heldout is not None and not self.observed_cells.any():
            raise ValueError("the held-out cells leave no cell to fit; hold out fewer cells")

    # -- cells -------------------------------------------------------------------------
    @property
    def shape(self):
        return self.Y_obs.shape

    @property
    def alpha_per_row(self):
        """alpha as one float per row."""
        return np.broadcast_to(np.asarray(self.alpha, dtype=np.float64), (self.shape[0],)).copy()

    @property
    def observed_cells(self):
        """Cells a fit sees: not held out, not structural zeros."""
        cells = np.ones(self.shape, dtype=bool)
        for mask in (self.heldout, self.structural_zeros):
            if mask is not None:
                cells &= ~mask
        return cells

    @property
    def heldout_cells(self):
        """Held-out cells that exist (the ones held-out MAE scores), or None."""
        if self.heldout is None:
            return None
        cells = self.heldout.copy()
        if self.structural_zeros is not None:
            cells &= ~self.structural_zeros
        return cells if cells.any() else None

    def with_heldout(self, heldout):
        """The same release with other held-out cells (None: none)."""
        return replace(self, heldout=heldout)

    def describe(self, *, noise_seed=True):
        """One line: shape, kind and the noise level in words; a simulation's seed only with
        ``noise_seed`` (for the screen: a line written into a file must leave it out)."""
        level = f"epsilon={self.epsilon:g}, N={self.N:g}, " if self.epsilon is not None and self.N is not None else ""
        if np.ndim(self.alpha):
            low, high = np.min(self.alpha), np.max(self.alpha)
            noise = f"per-row alpha, mean {np.mean(self.alpha):.3g} (from {low:.3g} to {high:.3g})"
        else:
            noise = f"{level}alpha={format_alpha(self.alpha)}"
        seed = f" (noise seed {self.noise_seed})" if noise_seed and self.noise_seed is not None else ""
        origin = f"simulation{seed}" if self.simulated else "release (exact noise)"
        return f"{' x '.join(f'{n:,}' for n in self.shape)} {self.kind}, {noise}; {origin}"

    # -- files ----------------------------------------------------------------------------
    def save(self, path, *, overwrite=False, noise_seed=False):
        """Write the release as ``.npz`` (the schema in this module's docstring).

        Labels are written when the release has them, which it does only when
        they were declared public (:func:`lpviz.privacy.privatize`,
        ``public_labels=True``). A simulation's seed is left out (the file
        still says ``simulated``): with the seed anyone subtracts the noise
        and holds the true counts. ``noise_seed=True`` writes it, for a
        simulation whose noise must be replayable.
        """
        from lpviz._files import atomic_write, output_exists, shown

        path = Path(path)
        if output_exists(path) and not overwrite:
            raise FileExistsError(f"{shown(path)} already exists; choose another name or pass overwrite=True")
        arrays = {
            "format": np.asarray(RELEASE_FORMAT),
            "Y_obs": self.Y_obs,
            "alpha": np.asarray(self.alpha, dtype=np.float64),
            "epsilon": np.asarray(np.nan if self.epsilon is None else self.epsilon),
            "N": np.asarray(np.nan if self.N is None else self.N),
            "kind": np.asarray(self.kind),
            "simulated": np.asarray(self.simulated),
            "name": np.asarray(str(self.name)),
        }
        if self.noise_seed is not None and noise_seed:
            arrays["noise_seed"] = np.asarray(self.noise_seed, dtype=np.int64)
        for key in ("heldout", "structural_zeros"):
            if getattr(self, key) is not None:
                arrays[key] = getattr(self, key)
        for key in ("row_labels", "col_labels"):
            if getattr(self, key) is not None:
                arrays[key] = np.asarray(getattr(self, key), dtype=str)
        for m, labels in enumerate(self.mode_labels or ()):
            if labels is not None:
                arrays[f"mode_labels_{m + 2}"] = np.asarray(labels, dtype=str)
        atomic_write(path, lambda handle: np.savez_compressed(handle, **arrays))
        return path

    @classmethod
    def load(cls, path, *, limit=None):
        """Read a release written by :meth:`save` (or ``lpviz privatize``).

        Read through the bounded reader (:class:`lpviz._files.Archive`):
        every member's header is checked (shape, dtype, agreement with the
        counts) and what the release will take in memory is checked against
        the budget (``limit``, default :func:`lpviz.budget.memory_limit`)
        before any array is decompressed. Every problem is a ``ValueError``
        (or an ``OSError`` for the file system) naming the file and the fix.
        """
        from lpviz._files import open_archive

        not_zip = "a .csv from `lpviz privatize` is a plain table without its noise level"
        with open_archive(path, what="release", fix=RELEASE_FIX, limit=limit, not_zip=not_zip) as archive:
            return cls._from_archive(archive)

    @classmethod
    def _from_archive(cls, archive):
        name = archive.name
        if "Y_obs" not in archive:
            raise ValueError(f"{name}: no noised counts 'Y_obs' in it (it holds {archive.listing()}); {RELEASE_FIX}")
        if "alpha" not in archive:
            raise ValueError(f"{name}: the release does not record its noise level 'alpha'; {RELEASE_FIX}")
        kind_of = archive.read_text("format", max_chars=64) if "format" in archive else RELEASE_FORMAT
        if kind_of != RELEASE_FORMAT:
            raise ValueError(f"{name}: its format is {kind_of!r}, not {RELEASE_FORMAT!r}; {RELEASE_FIX}")
        kind = archive.read_text("kind", max_chars=64) if "kind" in archive else None  # by the order, as given
        counts = archive.header("Y_obs")
        if counts.ndim < 2 or counts.dtype.kind not in "iu":
            raise ValueError(
                f"{name}: 'Y_obs' must hold integer counts in a matrix, not {_shape_words(counts.shape)} of "
                f"{counts.dtype}; {RELEASE_FIX}"
            )
        if 0 in counts.shape:
            raise ValueError(f"{name}: 'Y_obs' is empty ({_shape_words(counts.shape)}); {RELEASE_FIX}")
        alpha = archive.header("alpha")
        if alpha.dtype.kind not in "iuf" or alpha.shape not in ((), (counts.shape[0],)):
            raise ValueError(
                f"{name}: 'alpha' must be one number or one per row ({counts.shape[0]:,}), not "
                f"{_shape_words(alpha.shape)} of {alpha.dtype}; {RELEASE_FIX}"
            )
        for key in _CELL_MEMBERS:
            if key in archive:
                mask = archive.header(key)
                if mask.dtype != bool or mask.shape != counts.shape:
                    raise ValueError(
                        f"{name}: {key!r} must be booleans shaped like Y_obs {counts.shape}, not "
                        f"{_shape_words(mask.shape)} of {mask.dtype}; {RELEASE_FIX}"
                    )
        for key, axis in zip(_LABEL_MEMBERS, (0, 1), strict=True):
            if key in archive:
                labels = archive.header(key)
                if labels.dtype.kind not in "US" or labels.shape != (counts.shape[axis],):
                    raise ValueError(
                        f"{name}: {key!r} must be {counts.shape[axis]:,} texts, not "
                        f"{_shape_words(labels.shape)} of {labels.dtype}; {RELEASE_FIX}"
                    )
        mode_members = [f"mode_labels_{m}" for m in range(2, counts.ndim)]
        for key, size in zip(mode_members, counts.shape[2:], strict=True):
            if key in archive:
                labels = archive.header(key)
                if labels.dtype.kind not in "US" or labels.shape != (size,):
                    raise ValueError(
                        f"{name}: {key!r} must be {size:,} texts, not "
                        f"{_shape_words(labels.shape)} of {labels.dtype}; {RELEASE_FIX}"
                    )
        # What the release takes beside the arrays as stored: its own copy of the counts (at most as
        # wide), of each mask, the network's diagonal when none is stored, the cells a fit sees, and
        # the labels as Python strings.
        cells = counts.size
        extra = counts.nbytes + cells  # the copy; observed_cells when a mask is checked
        extra += sum(archive.header(key).nbytes for key in _CELL_MEMBERS if key in archive)
        if kind == "network" and "structural_zeros" not in archive:
            extra += cells
        extra += sum(
            archive.header(key).size * _LABEL_OVERHEAD + archive.header(key).nbytes
            for key in (*_LABEL_MEMBERS, *mode_members)
            if key in archive
        )
        archive.require(
            ["Y_obs", "alpha", *_CELL_MEMBERS, *_LABEL_MEMBERS, *mode_members],
            extra=extra,
            what=f"reading the release ({_shape_words(counts.shape)} noised counts of {counts.dtype})",
            fix="Check the file; if it is right, fit it on a machine with more memory.",
        )

        def number(key):
            if key not in archive:
                return None
            value = float(archive.read_scalar(key, kinds="iuf"))
            return None if np.isnan(value) else value

        seed = archive.read_scalar("noise_seed", kinds="iu") if "noise_seed" in archive else None
        alpha_values = archive.read("alpha")
        fields = dict(
            alpha=float(alpha_values) if alpha_values.ndim == 0 else alpha_values,
            epsilon=number("epsilon"),
            N=number("N"),
            kind=kind,
            heldout=archive.read("heldout") if "heldout" in archive else None,
            structural_zeros=archive.read("structural_zeros") if "structural_zeros" in archive else None,
            row_labels=archive.read("row_labels").tolist() if "row_labels" in archive else None,
            col_labels=archive.read("col_labels").tolist() if "col_labels" in archive else None,
            simulated=bool(archive.read_scalar("simulated", kinds="biu")) if "simulated" in archive else False,
            noise_seed=seed,
            name=archive.read_text("name") if "name" in archive else "",
            mode_labels=[archive.read(key).tolist() if key in archive else None for key in mode_members] or None,
        )
        counts = archive.read("Y_obs")
        try:
            return cls(Y_obs=counts, **fields)
        except (TypeError, ValueError) as error:
            raise ValueError(f"{name}: not a valid release: {error}") from None


RELEASE_FIX = "a release is written by `lpviz privatize IN OUT.npz` (or Release.save)"
_CELL_MEMBERS = ("heldout", "structural_zeros")
_LABEL_MEMBERS = ("row_labels", "col_labels")
_LABEL_OVERHEAD = 80  # bytes of a Python str object beyond its characters, and its place in a tuple


def _shape_words(shape):
    return "a scalar" if not shape else " x ".join(f"{n:,}" for n in shape)


@dataclass(frozen=True, eq=False)
class Truth:
    """What only the data owner (or a simulation) knows: the true counts ``Y``
    and, for simulated data, the true rates ``mu`` and factors."""

    Y: np.ndarray
    mu: np.ndarray | None = None
    factors: dict | None = field(default=None)

    def __post_init__(self):
        Y = np.asarray(self.Y.toarray() if hasattr(self.Y, "toarray") else self.Y)
        if Y.ndim < 2:
            raise ValueError(f"the true counts must have at least two modes (rows x columns), got shape {Y.shape}")
        if Y.dtype == bool or Y.dtype.kind not in "iuf":
            raise TypeError(f"the true counts must be integers, got dtype {Y.dtype}")
        check_count_bound(Y, "the true counts")  # the non-private method fits them
        object.__setattr__(self, "Y", _read_only(Y.astype(np.int64)))
        if self.mu is not None:
            mu = np.asarray(self.mu, dtype=np.float64)
            if mu.shape != Y.shape:
                raise ValueError(f"the true rates have shape {mu.shape} but the counts {Y.shape}")
            object.__setattr__(self, "mu", _read_only(mu))


def format_alpha(alpha):
    """alpha with significant digits (scientific notation when small): never '0.0000'."""
    alpha = float(alpha)
    return f"{alpha:.4g}" if alpha >= 1e-3 else f"{alpha:.3e}"
