"""The geometric mechanism: local privacy for counts.

Mechanism
---------
Each count ``y`` is released as ``y + tau`` with two-sided geometric noise

    P(tau) = (1 - alpha) / (1 + alpha) * alpha ** |tau|,   tau in Z,

which is the discrete Laplace distribution with ``scale = -1 / ln(alpha)``.

Privacy map (Schein et al. 2019, Theorem 1)
-------------------------------------------
For any ``N >= 1`` and any pair of inputs with ``||y - y'||_1 <= N``, the
mechanism with parameter ``alpha`` satisfies

    P(R(y) in S) <= exp(epsilon) * P(R(y') in S),   epsilon = N * ln(1 / alpha),

that is, it is (N, epsilon)-limited-precision locally private. So

    alpha = exp(-epsilon / N)        (alpha_from)
    epsilon = N * ln(1 / alpha)      (epsilon_from)
    scale = N / epsilon              (the discrete Laplace scale)

Only ``epsilon / N`` matters: (N, epsilon) and (2N, 2 epsilon) give the same
noise. (The ICML text once writes ``alpha = -exp(epsilon/N)``: a typo.) This
is the map OpenDP reports for its discrete Laplace measurement over an l1
distance: ``make_laplace(..., scale).map(N) == N / scale``.

Augmentation (Theorem 2)
------------------------
``tau ~ Skellam(lambda+, lambda-)`` with ``lambda+, lambda- ~ Exp`` of MEAN
``alpha / (1 - alpha)`` has the same two-sided geometric law; the private
sampler (:mod:`lpviz.methods.private`) relies on it.

Two samplers
------------
:func:`privatize` draws the noise with OpenDP's exact discrete Laplace
sampler by default (integer arithmetic and a cryptographically secure
generator, so no floating-point attack can tell which count was noised, and
no seed can replay it): that is a release of real data. Given a
``random_state`` it simulates instead: numpy's fast sampler, the difference
of two geometric variables, reproducible from the seed; the
:class:`~lpviz.release.Release` then says ``simulated=True``.
"""

import numbers

import numpy as np
import scipy.sparse as sp
from scipy.special import gammaln, xlogy

from lpviz._validate import MAX_ALPHA, MIN_RATIO, NEGLIGIBLE_ALPHA
from lpviz._validate import check_alpha as _check_alpha

__all__ = [
    "alpha_from",
    "epsilon_from",
    "privatize",
    "heterogeneous_alpha",
    "truncate",
    "geometric_logpmf",
    "skellam_logpmf",
    "noised_logpmf",
]

# Rows noised per block on the fast path: bounds the temporary memory of the
# two geometric draws to a few block-sized arrays whatever the size of Y.
_CELLS_PER_BLOCK = 1 << 22
# Cells per call into OpenDP on the exact path (it takes a Python list).
_EXACT_CELLS_PER_CALL = 1 << 18
# The noise levels that noise something, whether given as alpha or as epsilon/N: below
# NEGLIGIBLE_ALPHA (epsilon/N > 27.6) a cell is noised with probability < 2e-12 (the release is the
# true counts in all but name: refused unless allow_no_noise); above MAX_ALPHA (epsilon/N < 1e-12)
# the noise's scale passes 1e12 (nothing can be learnt: always refused).


# ---------------------------------------------------------------------------
# Privacy accounting
# ---------------------------------------------------------------------------


def _as_scalar_or_array(x):
    """``float`` for a scalar input, a float ndarray otherwise."""
    arr = np.asarray(x, dtype=float)
    return float(arr) if arr.ndim == 0 else arr


def _check_epsilon(epsilon):
    try:
        eps = np.asarray(epsilon, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"epsilon must be a positive number (or one per row), got {epsilon!r}") from None
    if eps.size == 0:
        raise ValueError("epsilon is empty: give one positive number (or one per row)")
    if not np.all(np.isfinite(eps)) or np.any(eps <= 0):
        raise ValueError(f"epsilon must be finite and > 0 (smaller epsilon = more noise), got {epsilon!r}")
    return eps


def _check_N(N):
    if isinstance(N, (bool, np.bool_)) or not isinstance(N, numbers.Real):
        raise TypeError(f"N must be a number >= 1 (the l1 distance made indistinguishable), got {N!r}")
    if not np.isfinite(N) or N < 1:
        raise ValueError(
            f"N must be >= 1: it is the l1 distance between counts the mechanism hides "
            f"(N=1 hides a single unit), got {N!r}"
        )
    return float(N)


def check_noise_level(alpha, *, allow_no_noise=False, allow="pass allow_no_noise=True"):
    """Refuse a noise level that noises nothing: alpha in (0, 1) within the open interval
    (NEGLIGIBLE_ALPHA, MAX_ALPHA], the same rule whether alpha was given or came from epsilon/N.

    ``allow`` says how the caller lets a negligible noise level through (the
    CLI: ``"add --allow-no-noise"``).
    """
    a = _check_alpha(alpha)
    if np.min(a) < NEGLIGIBLE_ALPHA and not allow_no_noise:
        raise ValueError(
            f"alpha = {np.min(a):.3g} (epsilon/N = {-np.log(np.min(a)):.3g}) noises a cell with "
            f"probability {2 * np.min(a):.1g}: the release would be the true counts. Use a smaller "
            f"epsilon (or larger N), or {allow} if that is really meant"
        )
    return a


def alpha_from(epsilon, N=1):
    """Noise parameter of the geometric mechanism for a privacy level.

    ``alpha = exp(-epsilon / N)``: the mechanism is then
    (N, epsilon)-limited-precision locally private (Theorem 1).

    Parameters
    ----------
    epsilon : float or array_like of float
        Privacy budget, > 0 (smaller is more private, more noise).
    N : float, default 1
        l1 distance between inputs made indistinguishable, >= 1.

    Returns
    -------
    float or ndarray
        ``alpha`` in (0, 1), a float for a scalar ``epsilon``.
    """
    eps = _check_epsilon(epsilon)
    ratio = eps / _check_N(N)
    alpha = np.exp(-ratio)
    if np.any(ratio < MIN_RATIO):
        raise ValueError(
            f"epsilon/N = {np.min(ratio):g} is so small that alpha = exp(-epsilon/N) rounds to 1 (within "
            f"1e-12): practically infinite noise, nothing could be learnt from the release; use epsilon/N of "
            f"at least {MIN_RATIO:g}"
        )
    if np.any(alpha == 0.0):
        raise ValueError(
            f"epsilon/N = {np.max(ratio):g} is so large that alpha = exp(-epsilon/N) underflows "
            "to 0: no noise at all, the release would be the true counts; use epsilon/N below 700 "
            "(below about 28 any noise is already rare)"
        )
    return _as_scalar_or_array(alpha)


def epsilon_from(alpha, N=1):
    """Privacy level of the geometric mechanism with parameter ``alpha``.

    ``epsilon = N * ln(1 / alpha)``: the inverse of :func:`alpha_from`.

    Parameters
    ----------
    alpha : float or array_like of float
        Noise parameter in (0, 1).
    N : float, default 1
        l1 distance between inputs made indistinguishable, >= 1.

    Returns
    -------
    float or ndarray
        ``epsilon`` > 0, a float for a scalar ``alpha``.
    """
    a = _check_alpha(alpha)
    return _as_scalar_or_array(-_check_N(N) * np.log(a))


def heterogeneous_alpha(n_rows, alpha0, concentration=10, random_state=None):
    """Per-row noise levels ``alpha_d ~ Beta(c * alpha0, c * (1 - alpha0))``.

    Models data owners who each pick their own privacy level around a common
    ``alpha0`` (Figure 3 of Schein et al. 2019); the mean of ``alpha_d`` is
    ``alpha0`` and larger ``concentration`` keeps them closer to it.

    Parameters
    ----------
    n_rows : int
        Number of rows (data owners), >= 1.
    alpha0 : float
        Mean noise parameter, in (0, 1).
    concentration : float, default 10
        Beta concentration ``c`` > 0.
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    ndarray of shape (n_rows,)
        Draws kept inside (0, 1): a Beta draw that rounds to exactly 0 or 1
        in floating point is moved to the nearest representable interior value.
    """
    if isinstance(n_rows, (bool, np.bool_)) or not isinstance(n_rows, numbers.Integral):
        raise TypeError(f"n_rows must be an integer >= 1, got {n_rows!r}")
    if n_rows < 1:
        raise ValueError(f"n_rows must be >= 1, got {n_rows}")
    if np.ndim(alpha0) != 0:
        raise TypeError(f"alpha0 must be one number in (0, 1), got {alpha0!r}")
    a0 = float(_check_alpha(alpha0))
    if not isinstance(concentration, numbers.Real) or not np.isfinite(concentration) or concentration <= 0:
        raise ValueError(f"concentration must be a finite number > 0, got {concentration!r}")
    rng = np.random.default_rng(random_state)
    draws = rng.beta(concentration * a0, concentration * (1.0 - a0), size=int(n_rows))
    # a Beta draw can round to 0 or 1: kept in (0, MAX_ALPHA], the levels a release may have (below
    # NEGLIGIBLE_ALPHA privatize refuses them unless allow_no_noise, as it refuses any such level)
    return np.clip(draws, np.finfo(float).tiny, MAX_ALPHA)


# ---------------------------------------------------------------------------
# The mechanism
# ---------------------------------------------------------------------------


def _check_counts(Y):
    """Y as a new int64 ndarray of non-negative counts (dense), or an error."""
    from lpviz.release import check_count_bound, summed_counts

    if isinstance(Y, np.ma.MaskedArray):
        # the values under a mask would be noised and released as if they were counts
        raise TypeError(
            "Y is a masked array: privatize would noise and release the values under its mask. Fill "
            "them (Y.filled(0)) and pass heldout=np.ma.getmaskarray(Y) to keep those cells out of every "
            "fit, or privatize only the cells you mean to release"
        )
    if sp.issparse(Y):
        Y = sp.coo_matrix(Y)  # any sparse format (dok, lil, csc ...); repeated entries are added below
        values = Y.data
        shape = Y.shape
        from lpviz.budget import check_memory, dense_bytes

        # the dense counts, their noised copy and the release's own copy
        check_memory(
            3 * dense_bytes(shape, np.int64),
            f"noising the {shape[0]:,} x {shape[1]:,} matrix",
            fix="Every cell gets noise, so a release is dense: noise a smaller matrix.",
        )
    else:
        try:
            values = np.asarray(Y)
        except (TypeError, ValueError) as err:
            raise TypeError(f"Y must be an array of non-negative integer counts: {err}") from None
        shape = values.shape
    if values.dtype == bool:
        raise TypeError("Y is boolean: convert it to counts first, e.g. Y.astype(np.int64)")
    if values.dtype.kind not in "iuf":
        raise TypeError(
            f"Y must hold integer counts, got dtype {values.dtype}; convert it with np.asarray(Y, dtype=np.int64)"
        )
    if len(shape) == 0:
        raise ValueError("Y is a scalar: pass an array of counts (e.g. np.atleast_1d(y))")
    if int(np.prod(shape)) == 0:
        raise ValueError(f"Y is empty (shape {shape}): there is nothing to privatize")
    if values.dtype.kind == "f":
        bad = ~np.isfinite(values)
        if bad.any():
            raise ValueError(
                f"Y has {int(bad.sum())} NaN or infinite entries: counts must be finite integers; "
                "fill or drop missing cells first (a chain's `mask` marks cells left out)"
            )
        fractional = values != np.floor(values)
        if fractional.any():
            raise ValueError(
                f"Y has {int(fractional.sum())} non-integer entries (e.g. {float(values[fractional].flat[0])}): "
                "the geometric mechanism noises integer counts; round or re-count them first"
            )
    if values.size and values.min() < 0:
        n_neg = int((values < 0).sum())
        raise ValueError(
            f"Y has {n_neg} negative entries (min {values.min().item()}): privatize expects true, "
            "non-negative counts. Already-privatized data must not be noised again."
        )
    check_count_bound(values, "Y")
    if not sp.issparse(Y):
        from lpviz.budget import check_memory, dense_bytes

        check_memory(
            3 * dense_bytes(shape, np.int64),
            f"noising the {' x '.join(f'{n:,}' for n in shape)} matrix",
            fix="Noise a smaller matrix.",
        )
    if sp.issparse(Y):
        return np.asarray(summed_counts(Y, "Y").toarray(), dtype=np.int64)
    return np.array(values, dtype=np.int64, copy=True)


def _resolve_alpha(epsilon, N, alpha, n_rows):
    """alpha as a float or an (n_rows,) array, from either epsilon (with N) or alpha."""
    if epsilon is None and alpha is None:
        raise ValueError("give the privacy level: epsilon (with N) or alpha")
    if epsilon is not None and alpha is not None:
        raise ValueError("give epsilon (with N) or alpha, not both: alpha = exp(-epsilon/N)")
    if alpha is not None:
        if N != 1:
            raise ValueError(
                "N only enters through alpha = exp(-epsilon/N): with alpha given, leave N at 1 "
                "(or pass epsilon and N instead of alpha)"
            )
        a = _check_alpha(alpha)
    else:
        a = np.asarray(alpha_from(epsilon, N))
    if a.ndim == 0:
        return float(a)
    if a.shape != (n_rows,):
        raise ValueError(
            f"per-row privacy level has shape {a.shape} but Y has {n_rows} rows: "
            f"give a scalar or one value per row, shape ({n_rows},)"
        )
    return a


def _geometric_noise_fast(out, alpha, rng):
    """Add two-sided geometric noise in place, row block by row block.

    tau = g1 - g2 with g1, g2 iid Geometric(1 - alpha) (Theorem 2's proof).
    """
    n_rows = out.shape[0]
    row_size = max(1, out[0].size)
    block = max(1, _CELLS_PER_BLOCK // row_size)
    extra_dims = (1,) * (out.ndim - 1)
    for start in range(0, n_rows, block):
        rows = out[start : start + block]
        if np.ndim(alpha) == 0:
            p = 1.0 - alpha
        else:
            p = np.broadcast_to((1.0 - alpha[start : start + block]).reshape((-1,) + extra_dims), rows.shape)
        rows += rng.geometric(p, size=rows.shape)
        rows -= rng.geometric(p, size=rows.shape)


def _geometric_noise_exact(out, alpha):
    """Add noise in place with OpenDP's exact discrete Laplace sampler.

    Discrete Laplace with scale s has P(tau) proportional to exp(-|tau|/s),
    the two-sided geometric law with alpha = exp(-1/s). Rows sharing an
    alpha share one measurement; cells go to OpenDP in bounded batches
    because it takes Python lists.
    """
    import opendp.prelude as dp

    dp.enable_features("contrib")
    space = (dp.vector_domain(dp.atom_domain(T="i64")), dp.l1_distance(T="i64"))
    n_rows = out.shape[0]
    flat = out.reshape(n_rows, -1)  # a view: out is our own contiguous copy
    values, row_group = np.unique(np.broadcast_to(alpha, (n_rows,)), return_inverse=True)
    rows_per_call = max(1, _EXACT_CELLS_PER_CALL // flat.shape[1])
    for group, value in enumerate(values):
        measurement = dp.m.make_laplace(*space, scale=-1.0 / np.log(value))
        rows = np.flatnonzero(row_group.ravel() == group)
        for start in range(0, rows.size, rows_per_call):
            batch = rows[start : start + rows_per_call]
            noised = measurement(flat[batch].ravel().tolist())
            flat[batch] = np.asarray(noised, dtype=np.int64).reshape(batch.size, -1)


def privatize(
    Y,
    epsilon=None,
    N=1,
    *,
    alpha=None,
    kind=None,
    heldout=None,
    structural_zeros=None,
    row_labels=None,
    col_labels=None,
    mode_labels=None,
    name="",
    random_state=None,
    exact=None,
    allow_no_noise=False,
):
    """Release counts through the geometric mechanism: a :class:`~lpviz.release.Release`.

    Each cell gets independent two-sided geometric noise
    ``P(tau) = (1-alpha)/(1+alpha) alpha^|tau|`` with ``alpha = exp(-epsilon/N)``:
    the release is (N, epsilon)-limited-precision locally private (Theorem 1
    of Schein et al. 2019). Give either ``epsilon`` (with ``N``) or ``alpha``.

    By default the noise comes from OpenDP's exact discrete Laplace sampler
    with a cryptographically secure generator: the only kind of noise that
    protects real data (a floating-point sampler has holes, and seeded noise
    is undone by whoever knows the seed). Passing ``random_state`` asks for a
    *simulation* instead: numpy's fast sampler, reproducible from the seed,
    and the release says so (``simulated=True``, ``noise_seed``).

    Parameters
    ----------
    Y : array_like of any order >= 2, or scipy.sparse matrix, of non-negative integer counts
        Integer dtype, or floats holding whole numbers. Not modified. Noise
        hits every cell, zeros included, so the result is always dense. A
        row is an index of the first mode (a document, a sender): per-row
        noise levels apply to all its cells.
    epsilon : float or array_like of shape (n_rows,), optional
        Privacy budget > 0; one value per row for heterogeneous noise.
    N : float, default 1
        l1 distance between counts made indistinguishable, >= 1.
    alpha : float or array_like of shape (n_rows,), optional
        Noise parameter in (0, 1), instead of ``epsilon``.
    kind : {"documents", "network", "tensor"}, optional
        A network is square; its diagonal (no self loops) is a structural
        zero: not noised, released as 0. Default: "tensor" for an array of
        order >= 3 (e.g. sender x recipient x month), else "documents".
    heldout, structural_zeros : bool arrays, optional
        Cells held out of every fit; cells that do not exist (not noised).
    row_labels, col_labels : sequences of str, optional
        Labels to publish with the counts (only labels that are public anyway:
        labels chosen from the true data reveal it).
    mode_labels : sequence, optional
        Arrays of order >= 3: labels of each further mode (e.g. months), or None.
    name : str
        The data set's name.
    random_state : None, int or numpy.random.Generator
        None (default): exact noise. Given: a seeded simulation.
    exact : bool, optional
        Ask for one or the other explicitly: ``exact=True`` refuses a
        ``random_state``; ``exact=False`` without one simulates with a fresh
        seed (recorded in the release).
    allow_no_noise : bool
        Allow a noise level so low (alpha < 1e-12, epsilon/N > 27.6) that
        practically no cell is noised; refused by default.

    Returns
    -------
    Release
        ``Y_obs`` int64 (can be negative), the noise level and the flags.
    """
    from lpviz.release import MAX_COUNT, Release, check_count_bound, kind_of

    counts = _check_counts(Y)
    # labels are read once: a generator checked here would reach the release empty
    row_labels, col_labels = (None if labels is None else tuple(labels) for labels in (row_labels, col_labels))
    if mode_labels is not None:
        mode_labels = tuple(None if labels is None else tuple(labels) for labels in mode_labels)
    if counts.ndim < 2:
        raise ValueError(
            f"Y must be a count array with at least two modes (rows x columns, or e.g. sender x recipient x "
            f"month), got shape {counts.shape}"
        )
    kind = kind_of(counts.shape) if kind is None else kind
    a = _resolve_alpha(epsilon, N, alpha, counts.shape[0])
    check_noise_level(a, allow_no_noise=allow_no_noise)
    if exact is not None and not isinstance(exact, (bool, np.bool_)):
        raise TypeError(f"exact must be True, False or None, got {exact!r}")
    if exact and random_state is not None:
        raise ValueError(
            "exact noise is drawn from OpenDP's cryptographically secure generator, which cannot be "
            "seeded (seeded noise could be replayed to undo the privacy); drop random_state, or leave "
            "exact unset for a reproducible simulation"
        )
    if kind == "network" and structural_zeros is None and counts.shape[0] == counts.shape[1]:
        structural_zeros = np.eye(*counts.shape, dtype=bool)
    release_fields = dict(
        alpha=a,
        epsilon=None if epsilon is None else epsilon,
        N=None if epsilon is None else N,
        kind=kind,
        heldout=heldout,
        structural_zeros=structural_zeros,
        row_labels=row_labels,
        col_labels=col_labels,
        mode_labels=mode_labels,
        name=name,
    )
    if np.ndim(epsilon):  # per-row epsilon: the release records alpha per row
        release_fields.update(epsilon=None, N=None)
    # the release's other fields are checked before any time goes into noise
    _check_release_fields(counts.shape, release_fields)
    simulate = random_state is not None or exact is False
    if simulate:
        seed = random_state
        if seed is None:
            seed = int(np.random.SeedSequence().entropy % (2**63))
        noise_seed = int(seed) if isinstance(seed, (numbers.Integral, np.integer)) else None
        noised = counts.copy()
        _geometric_noise_fast(noised, a, np.random.default_rng(seed))
    else:
        noise_seed = None
        noised = counts.copy()
        _geometric_noise_exact(noised, a)
    if structural_zeros is not None:
        noised[np.asarray(structural_zeros, dtype=bool)] = 0  # nothing there to release
    try:
        check_count_bound(noised, "the noised counts")
    except ValueError as error:  # a true count near the bound, noise that wide: the fit would refuse it
        raise ValueError(
            f"{error} (the noise took a count past |count| <= {MAX_COUNT:,}); noise smaller counts "
            "(rescale them) or use a larger epsilon"
        ) from None
    return Release(Y_obs=noised, simulated=simulate, noise_seed=noise_seed, **release_fields)


def _check_release_fields(shape, fields):
    from lpviz.release import _check_cells, _check_labels, _check_mode_labels, check_kind

    check_kind(fields["kind"], shape)
    _check_cells("heldout", fields["heldout"], shape)
    _check_cells("structural_zeros", fields["structural_zeros"], shape)
    _check_labels("row_labels", fields["row_labels"], shape[0])
    _check_labels("col_labels", fields["col_labels"], shape[1])
    _check_mode_labels(fields["mode_labels"], shape)


def truncate(Y_obs):
    """``max(Y_obs, 0)``: the privatized counts as the naive method sees them.

    Clipping negative releases to zero is the truncated geometric mechanism
    (Ghosh et al. 2012); it biases small counts upward, which is why the
    private sampler models the noise instead. Returns a new int64 array (a
    new sparse matrix for sparse input).
    """
    if sp.issparse(Y_obs):
        out = Y_obs.copy()
        out.data = truncate(out.data)
        out.eliminate_zeros()
        return out
    values = np.asarray(Y_obs)
    if values.dtype == bool or values.dtype.kind not in "iuf":
        raise TypeError(f"Y_obs must hold integer counts, got dtype {values.dtype}")
    if values.dtype.kind == "f":
        if not np.all(np.isfinite(values)):
            raise ValueError("Y_obs has NaN or infinite entries: privatized counts are finite integers")
        if np.any(values != np.floor(values)):
            raise ValueError("Y_obs has non-integer entries: privatized counts are integers")
    return np.maximum(values, 0).astype(np.int64)


# ---------------------------------------------------------------------------
# Log pmfs that stay finite far in the tails
# ---------------------------------------------------------------------------


def geometric_logpmf(tau, alpha):
    """Log pmf of the two-sided geometric distribution.

    ``log P(tau) = log(1-alpha) - log(1+alpha) + |tau| log(alpha)``; exact in
    log space, so finite for any integer ``tau``. Broadcasts over ``tau`` and
    ``alpha``.
    """
    a = _check_alpha(alpha)
    t = np.abs(np.asarray(tau, dtype=float))
    out = np.log1p(-a) - np.log1p(a) + t * np.log(a)
    return out if out.ndim else float(out)


def _poisson_logpmf(k, mu):
    k = np.asarray(k, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = xlogy(k, mu) - mu - gammaln(k + 1.0)
    return np.where(k >= 0, out, -np.inf)


def skellam_logpmf(k, mu1, mu2):
    """Log pmf of ``k = g1 - g2``, ``g1 ~ Pois(mu1)``, ``g2 ~ Pois(mu2)``.

    ``log P(k) = -(mu1 + mu2) + (k/2) log(mu1/mu2) + log I_|k|(2 sqrt(mu1 mu2))``,
    with ``log I`` from :func:`lpviz.bessel.log_iv`, which stays finite where
    ``scipy.special.iv`` underflows (scipy's ``skellam.logpmf(200, 1, 1)``
    is -inf; the true value is about -865.2). ``mu1`` or ``mu2`` may be 0 (a
    Poisson law on one side). Broadcasts over all arguments.
    """
    from lpviz.bessel import log_iv

    k, m1, m2 = np.broadcast_arrays(
        np.asarray(k, dtype=float), np.asarray(mu1, dtype=float), np.asarray(mu2, dtype=float)
    )
    if np.any(~np.isfinite(m1)) or np.any(~np.isfinite(m2)) or np.any(m1 < 0) or np.any(m2 < 0):
        raise ValueError("Skellam rates mu1, mu2 must be finite and >= 0")
    if np.any(k != np.floor(k)):
        raise ValueError("Skellam is a law on integers: k must hold whole numbers")
    out = np.empty(k.shape, dtype=float)
    both = (m1 > 0) & (m2 > 0)
    if both.any():
        kb, ab, bb = k[both], m1[both], m2[both]
        nu = np.abs(kb)
        out[both] = -(ab + bb) + 0.5 * kb * (np.log(ab) - np.log(bb)) + log_iv(nu, 2.0 * np.sqrt(ab * bb))
    # One rate zero: the difference is Poisson on one side only.
    only1 = ~both & (m2 == 0)
    out[only1] = _poisson_logpmf(k[only1], m1[only1])
    only2 = ~both & (m2 > 0)  # here mu1 == 0
    out[only2] = _poisson_logpmf(-k[only2], m2[only2])
    return out if out.ndim else float(out)


def noised_logpmf(y_noised, mu, alpha):
    """Log pmf of a noised count given its rate: ``ytil = y + tau``, ``y ~ Pois(mu)``, ``tau ~ 2Geo(alpha)``.

    What every method predicts for a cell the analyst holds noised (DESIGN.md 1f), in closed form::

        p(ytil | mu, alpha) = (1-alpha)/(1+alpha) * [ alpha^ytil exp(mu (1/alpha - 1)) F(ytil; mu/alpha)
                                                     + alpha^-ytil exp(-mu (1 - alpha)) (1 - F(ytil; mu alpha)) ]

    with ``F`` the Poisson CDF, evaluated in logs so it stays finite far in the tails (Numba,
    :mod:`lpviz._noised_kernels`). Broadcasts over all three arguments (``alpha`` one value per row:
    pass it shaped ``(n_rows, 1)`` against a matrix). ``alpha`` in (0, 1); an alpha below 1e-12 (the
    no-noise fits' ``1e-300``) gives the Poisson law.
    """
    from lpviz._noised_kernels import noised_logpmf_array

    try:
        y, m, a = np.broadcast_arrays(
            np.asarray(y_noised, dtype=float), np.asarray(mu, dtype=float), np.asarray(alpha, dtype=float)
        )
    except ValueError as error:
        raise ValueError(f"y_noised, mu and alpha must broadcast to one shape: {error}") from None
    if not np.all(np.isfinite(y)) or np.any(y != np.floor(y)):
        raise ValueError("y_noised must hold whole numbers (noised counts may be negative)")
    if not np.all(np.isfinite(m)) or np.any(m < 0):
        raise ValueError("the rates mu must be finite and >= 0")
    if not np.all(np.isfinite(a)) or np.any(a <= 0) or np.any(a >= 1):
        raise ValueError("alpha must lie strictly between 0 and 1 (alpha = exp(-epsilon/N))")
    flat = [np.ascontiguousarray(v, dtype=np.float64).ravel() for v in (y, m, a)]
    out = noised_logpmf_array(*flat, np.empty(flat[0].size))
    out = out.reshape(y.shape)
    return out if out.ndim else float(out)
