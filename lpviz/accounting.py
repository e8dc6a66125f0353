"""Privacy accounting for central DP: the Poisson-subsampled Gaussian, composed.

A trusted curator that, at each of ``steps`` steps, includes every document
independently with probability ``sampling_rate`` (``q``) and releases a sum of
per-document contributions of L2 norm at most ``Delta`` plus
``N(0, noise_multiplier**2 Delta**2)`` noise is the mechanism

    SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(sigma)), steps)

of the ``dp-accounting`` library. This module is a thin wrapper over that
library: :func:`epsilon` asks one of its accountants for the epsilon at a
given delta, :func:`noise_multiplier` searches the smallest ``sigma`` whose
epsilon is within budget. No accounting is done here by hand.

Privacy unit: one document added to or removed from the corpus (the
``ADD_OR_REMOVE_ONE`` neighbouring relation both accountants use by
default, and the one Poisson subsampling is analysed under). A guarantee
for replacing one document follows by group privacy over two documents.

Accountants
-----------
``"pld"`` (default): privacy loss distributions
(``dp_accounting.pld.PLDAccountant``), numerically tight; its
discretisation is pessimistic, so the reported epsilon is an upper bound.
Its grid has ``value_discretization_interval = 1e-4 * max(1, 1 / sigma**2)``:
dp-accounting's default for ``sigma >= 1``, and coarser for small ``sigma``,
where the privacy loss spans a range that grows like ``1 / sigma**2`` and
the default grid would need gigabytes (``sigma = 1e-3``: 38 GiB). A coarser
grid stays a valid upper bound; it only loosens it slightly.

``"rdp"``: Renyi DP (``dp_accounting.rdp.RdpAccountant``, its default
orders), the moments accountant of Abadi et al. (2016) that Park et al.
used in its modern form; looser than PLD.

Reference (Park et al. 2016, Wikipedia run: q = 0.05, sigma = 1.24, 20
steps, delta = 1e-4): RDP 1.213, PLD 0.932 with dp-accounting 0.6.0; the
paper's own 2016 accountant reported 2.44.
"""

import contextlib
import functools
import logging
import numbers

import numpy as np
from dp_accounting import GaussianDpEvent, PoissonSampledDpEvent, SelfComposedDpEvent
from dp_accounting.pld import PLDAccountant, privacy_loss_distribution
from dp_accounting.rdp import RdpAccountant, rdp_privacy_accountant
from scipy.optimize import brentq

__all__ = ["epsilon", "noise_multiplier", "ACCOUNTANTS"]

ACCOUNTANTS = ("pld", "rdp")

_DEFAULT_PLD_INTERVAL = 1e-4
# Relative tolerance on sigma of the calibration: the returned sigma is
# within this fraction of the smallest sigma that meets the budget.
_CALIBRATION_RTOL = 1e-5


# ---------------------------------------------------------------------------
# argument checks
# ---------------------------------------------------------------------------


def _is_real(value):
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _check_sampling_rate(sampling_rate):
    if not _is_real(sampling_rate) or not 0 < sampling_rate <= 1:
        raise ValueError(
            f"sampling_rate must be a number in (0, 1] (the probability that a document is "
            f"in a minibatch, batch_size / n_documents), got {sampling_rate!r}"
        )
    return float(sampling_rate)


def _check_noise_multiplier(noise_multiplier):
    if not _is_real(noise_multiplier) or not np.isfinite(noise_multiplier) or noise_multiplier < 0:
        raise ValueError(
            f"noise_multiplier must be a finite number >= 0 (noise std / sensitivity; "
            f"0 = no noise), got {noise_multiplier!r}"
        )
    return float(noise_multiplier)


def _check_delta(delta):
    if not _is_real(delta) or not 0 < delta < 1:
        raise ValueError(
            f"delta must be a number in (0, 1), typically well below 1 / n_documents (e.g. 1e-5), got {delta!r}"
        )
    return float(delta)


def _check_epsilon(epsilon):
    if not _is_real(epsilon) or not np.isfinite(epsilon) or epsilon <= 0:
        raise ValueError(f"epsilon must be a finite number > 0, got {epsilon!r}")
    return float(epsilon)


def _check_steps(steps):
    """An int >= 1, or a strictly increasing 1-D sequence of them (returned as int64 array)."""
    if isinstance(steps, (numbers.Integral, np.integer)) and not isinstance(steps, (bool, np.bool_)):
        if steps < 1:
            raise ValueError(f"steps must be an integer >= 1 (the number of noisy releases), got {steps}")
        return int(steps)
    if isinstance(steps, (bool, np.bool_, numbers.Real, str)):
        raise TypeError(f"steps must be an integer >= 1 (or an increasing sequence of them), got {steps!r}")
    array = np.asarray(steps)
    if array.ndim != 1 or array.size == 0 or not np.issubdtype(array.dtype, np.integer):
        raise TypeError(
            f"steps must be an integer >= 1 or a non-empty 1-D sequence of increasing integers, got {steps!r}"
        )
    if array[0] < 1 or np.any(np.diff(array) <= 0):
        raise ValueError(f"a sequence of steps must be strictly increasing integers >= 1, got {array.tolist()}")
    return array.astype(np.int64)


def _check_accountant(accountant):
    if accountant not in ACCOUNTANTS:
        raise ValueError(
            f"accountant must be one of {ACCOUNTANTS} ('pld': privacy loss distributions, "
            f"tight; 'rdp': Renyi DP), got {accountant!r}"
        )
    return accountant


# ---------------------------------------------------------------------------
# the accountants
# ---------------------------------------------------------------------------


def _pld_interval(noise_multiplier):
    """dp-accounting's default PLD grid for sigma >= 1, widened like 1 / sigma**2 below."""
    if noise_multiplier == 0:
        return _DEFAULT_PLD_INTERVAL
    return _DEFAULT_PLD_INTERVAL * max(1.0, 1.0 / noise_multiplier**2)


def _step_event(sampling_rate, noise_multiplier):
    return PoissonSampledDpEvent(sampling_rate, GaussianDpEvent(noise_multiplier))


@contextlib.contextmanager
def _quiet_rdp_orders():
    """Silence dp-accounting's absl warnings that a fractional RDP order failed to converge.

    The accountant then leaves that order out, which keeps the epsilon a
    valid (slightly looser) bound; at large sampling rates it happens for
    every call and would flood the log.
    """
    logger = logging.getLogger("absl")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _fresh_accountant(accountant, noise_multiplier):
    if accountant == "rdp":
        return RdpAccountant()
    return PLDAccountant(value_discretization_interval=_pld_interval(noise_multiplier))


def _epsilon_after(sampling_rate, noise_multiplier, steps, delta, accountant):
    event = SelfComposedDpEvent(_step_event(sampling_rate, noise_multiplier), steps)
    with _quiet_rdp_orders():
        return float(_fresh_accountant(accountant, noise_multiplier).compose(event).get_epsilon(delta))


def _epsilon_curve(sampling_rate, noise_multiplier, steps, delta, accountant):
    """Epsilon after each count in the increasing array ``steps``, composing incrementally."""
    if noise_multiplier == 0:
        return np.full(len(steps), np.inf)
    if accountant == "rdp":
        # RDP composes by addition: t steps have t times the one-step RDP.
        # Convert t * (the accountant's one-step RDP) with its own
        # compute_epsilon, as its get_epsilon does, rather than recomputing the
        # one-step RDP (0.1-0.5 s) for every step. (Private attributes of
        # dp-accounting 0.6; tests check the result against get_epsilon.)
        ledger = RdpAccountant()
        with _quiet_rdp_orders():
            ledger.compose(_step_event(sampling_rate, noise_multiplier))
            return np.array(
                [
                    rdp_privacy_accountant.compute_epsilon(ledger._orders, count * ledger._rdp, delta)[0]
                    for count in steps
                ]
            )
    # The PLD accountant rebuilds the one-step distribution on every compose
    # (~1 s); build it once with the same call the accountant makes and
    # compose the distributions directly.
    one_step = privacy_loss_distribution.from_gaussian_mechanism(
        standard_deviation=noise_multiplier,
        value_discretization_interval=_pld_interval(noise_multiplier),
        sampling_prob=sampling_rate,
    )
    out = np.empty(len(steps))
    composed = None
    for i, gap in enumerate(np.diff(steps, prepend=0)):
        block = one_step if gap == 1 else one_step.self_compose(int(gap))
        composed = block if composed is None else composed.compose(block)
        out[i] = composed.get_epsilon_for_delta(delta)
    return out


def epsilon(sampling_rate, noise_multiplier, steps, delta, accountant="pld"):
    """Epsilon spent by ``steps`` Poisson-subsampled Gaussian releases.

    Parameters
    ----------
    sampling_rate : float in (0, 1]
        Probability ``q`` that a document is in a minibatch
        (``batch_size / n_documents``).
    noise_multiplier : float >= 0
        Noise standard deviation divided by the L2 sensitivity ``Delta``.
        0 means no noise: epsilon is infinite.
    steps : int >= 1, or an increasing sequence of ints
        Number of releases. A sequence gives the epsilon after each of
        those numbers of steps (one pass of composition, not one per entry).
    delta : float in (0, 1)
    accountant : {"pld", "rdp"}
        See the module docstring.

    Returns
    -------
    float, or ndarray of floats if ``steps`` is a sequence

    Examples
    --------
    >>> round(epsilon(0.05, 1.24, 20, 1e-4, accountant="rdp"), 3)
    1.213
    """
    q = _check_sampling_rate(sampling_rate)
    sigma = _check_noise_multiplier(noise_multiplier)
    steps = _check_steps(steps)
    delta = _check_delta(delta)
    accountant = _check_accountant(accountant)
    if isinstance(steps, int):
        return _epsilon_after(q, sigma, steps, delta, accountant)
    return _epsilon_curve(q, sigma, steps, delta, accountant)


def _bracket(gap, start, factor, target, delta):
    """(low, high) with gap(low) > 0 >= gap(high), stepping by ``factor`` from ``start``."""
    if gap(start) > 0:  # too little noise: raise it until within budget
        low = high = start
        for _ in range(200):
            high *= factor
            if gap(high) <= 0:
                return low, high
            low = high
        raise ValueError(
            f"no noise multiplier up to {high:g} reaches epsilon={target} at "
            f"delta={delta}; raise epsilon or delta, or lower sampling_rate or steps"
        )
    low = high = start
    for _ in range(200):  # enough noise: lower it until over budget
        low /= factor
        if gap(low) > 0:
            return low, high
        high = low
    raise ValueError(
        f"even noise_multiplier={low:g} spends at most epsilon={target}; "
        "use a smaller epsilon (or noise_multiplier=0 for no privacy)"
    )


def noise_multiplier(epsilon, delta, sampling_rate, steps, accountant="pld"):
    """The smallest noise multiplier whose ``steps`` releases spend at most ``epsilon``.

    Root search over :func:`epsilon` (decreasing in the noise multiplier):
    a bracket found by stepping from a start (RDP: 1, doubling or halving;
    PLD: the RDP answer, by factors of 1.25), then Brent's method to a
    relative tolerance of 1e-5 on sigma, stepping to the safe side of the
    crossing, so ``epsilon(q, noise_multiplier(eps, ...), ...) <= eps``
    always holds and the result is within about 2e-5 (relative) of the
    smallest sigma that meets the budget. (``dp_accounting``'s
    ``calibrate_dp_mechanism`` does the same search but takes one fixed
    accountant, while the PLD grid here depends on sigma.)

    Parameters
    ----------
    epsilon : float > 0
    delta : float in (0, 1)
    sampling_rate : float in (0, 1]
    steps : int >= 1
    accountant : {"pld", "rdp"}

    Returns
    -------
    float
    """
    target = _check_epsilon(epsilon)
    delta = _check_delta(delta)
    q = _check_sampling_rate(sampling_rate)
    steps = _check_steps(steps)
    if not isinstance(steps, int):
        raise TypeError(f"steps must be one integer >= 1 here (the planned number of releases), got {steps!r}")
    accountant = _check_accountant(accountant)

    @functools.cache  # brentq re-evaluates the bracket ends
    def gap(sigma):
        return _epsilon_after(q, sigma, steps, delta, accountant) - target

    # A PLD evaluation costs ~1 s, an RDP one ~0.1 s: start the PLD search
    # from the RDP answer (RDP is looser, so PLD needs a little less noise).
    start, factor = (
        (1.0, 2.0) if accountant == "rdp" else (noise_multiplier(target, delta, q, steps, accountant="rdp"), 1.25)
    )
    low, high = _bracket(gap, start, factor, target, delta)
    # invariant: gap(low) > 0 >= gap(high)
    xtol = _CALIBRATION_RTOL * low
    root = brentq(gap, low, high, xtol=xtol, rtol=_CALIBRATION_RTOL)
    if gap(root) <= 0:
        return float(root)
    # brentq's root is within xtol + rtol * root of the crossing: step over it
    safe = min(root + xtol + _CALIBRATION_RTOL * root, high)
    return float(safe if gap(safe) <= 0 else high)
