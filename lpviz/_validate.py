"""The argument checks several modules share: one copy each, one wording each.

Integers and positive numbers (a model's ``n_components`` and ``a0``, a
generator's sizes, an estimator's step counts), the noise level ``alpha``
(the mechanism's range check and a chain's one-value-per-row form) and 2-D
float matrices. Each returns the checked value in its plain form (``int``,
``float``, an array) so callers write ``n = check_int("n", n, 1)``.
"""

import math
import numbers
import warnings

import numpy as np

__all__ = [
    "MAX_ALPHA",
    "MIN_RATIO",
    "NEGLIGIBLE_ALPHA",
    "as_2d_float",
    "check_alpha",
    "check_alpha_rows",
    "check_int",
    "check_positive",
]

NEGLIGIBLE_ALPHA = 1e-12
MIN_RATIO = 1e-12
MAX_ALPHA = float(np.exp(-MIN_RATIO))


def check_int(name, value, minimum):
    """``value`` as an ``int`` >= ``minimum``; TypeError for a non-integer (bools included), ValueError below."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def check_positive(name, value, hint=""):
    """``value`` as a finite ``float`` > 0 (ValueError otherwise); ``hint`` is added to the message."""
    if (
        isinstance(value, (bool, np.bool_))
        or not isinstance(value, numbers.Real)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"{name} must be a finite number > 0{hint}, got {value!r}")
    return float(value)


def check_alpha(alpha):
    """The geometric mechanism's noise level: numbers strictly in (0, 1), at most MAX_ALPHA, as a float array."""
    try:
        a = np.asarray(alpha, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"alpha must be a number in (0, 1) (or one per row), got {alpha!r}") from None
    if a.size == 0:
        raise ValueError("alpha is empty: give one number in (0, 1) (or one per row)")
    if not np.all(np.isfinite(a)) or np.any(a <= 0) or np.any(a >= 1):
        raise ValueError(
            "alpha must lie strictly between 0 and 1 (alpha = exp(-epsilon/N); "
            f"0 would be no noise, 1 infinite noise), got {_shown_values(alpha)}"
        )
    if np.any(a > MAX_ALPHA):
        raise ValueError(
            f"alpha = {float(np.max(a))!r} is within 1e-12 of 1 (epsilon/N = {-np.log(np.max(a)):.3g}, below "
            f"{MIN_RATIO:g}): the noise would be practically infinite (scale {-1 / np.log(np.max(a)):.3g}) and "
            f"nothing could be learnt from the release; use alpha at most {MAX_ALPHA!r} (epsilon/N of at "
            f"least {MIN_RATIO:g})"
        )
    return a


def _shown_values(values):
    """A value or array for a message: at most a few numbers."""
    array = np.asarray(values)
    if array.size <= 4:
        return repr(values) if array.ndim == 0 else repr(array.tolist())
    return f"{array.size:,} values from {np.nanmin(array):g} to {np.nanmax(array):g}"


def check_alpha_rows(alpha, n_rows, method_name):
    """A chain's noise level: one float per row (a scalar is spread), for a method that needs it."""
    if alpha is None:
        raise ValueError(
            f"method={method_name!r} needs the noise level: pass alpha (a scalar in (0, 1) "
            "or one value per row), e.g. alpha=lpviz.alpha_from(epsilon, N), or a Release"
        )
    values = check_alpha(alpha)  # the mechanism's own check: numbers strictly in (0, 1)
    if values.ndim == 0:
        values = np.full(n_rows, float(values))
    elif values.shape != (n_rows,):
        raise ValueError(f"alpha must be a scalar or have one value per row ({n_rows}), got shape {values.shape}")
    return np.ascontiguousarray(values, dtype=np.float64)


def as_2d_float(name, values):
    """``values`` as a 2-D float64 array (ValueError naming its shape otherwise)."""
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 2:
        raise ValueError(f"{name} must be a 2-D matrix, got an array of shape {array.shape}")
    return array


# Rows of the counts looked at a time when counting their positive cells (warn_components).
_COUNT_ROWS = 4096


def _positive_cells(data):
    """How many cells of ``data`` (a Release's noised counts, an array or a sparse matrix) are
    positive, counted a block of rows at a time; None for data whose cells are not here (a
    generator whose rows the workers build)."""
    counts = getattr(data, "Y_obs", data)
    if hasattr(counts, "tocsr") and hasattr(counts, "data"):  # scipy sparse: its stored values
        return int(np.count_nonzero(np.asarray(counts.data) > 0))
    if not isinstance(counts, np.ndarray) or counts.ndim < 2:
        return None
    return sum(int(np.count_nonzero(counts[row : row + _COUNT_ROWS] > 0)) for row in range(0, len(counts), _COUNT_ROWS))


def warn_components(data, n_components, stacklevel=3):
    """Warn, before a fit starts, when ``n_components`` is far beyond what ``data`` hold: more than a
    matrix's min(rows, columns) (for a tensor, its cells over its largest mode: the most
    components its unfoldings hold), or more than its positive cells. Such components fit noise
    and every iteration's time and memory grow with them (issue 58: n_components=10**6 on 40 x 20
    counts ran for minutes without a word). What is not a count is left to the model to refuse."""
    shape = getattr(data, "shape", None)
    if (
        shape is None
        or len(shape) < 2
        or isinstance(n_components, bool)
        or not isinstance(n_components, (int, np.integer))
        or n_components < 2
    ):
        return
    shape = tuple(int(n) for n in shape)
    most = math.prod(shape) // max(max(shape), 1)
    described = " x ".join(f"{n:,}" for n in shape)
    if len(shape) == 2:
        bound = f"min(rows, columns) = {most:,}"
    else:
        bound = f"{most:,} (its cells over its largest mode)"
    if n_components > most:
        problem = f"more than data of shape {described} can hold: at most {bound} components"
    else:
        positive = _positive_cells(data)
        if positive is None or n_components <= positive:
            return
        problem = f"more than the {positive:,} positive cells of the {described} counts"
        most = max(positive, 1)
    warnings.warn(
        f"n_components={int(n_components):,} is {problem}; the extra components fit noise and make every "
        f"iteration slower and larger. Fit with n_components <= {most:,} (or check the data).",
        UserWarning,
        stacklevel=stacklevel,
    )
