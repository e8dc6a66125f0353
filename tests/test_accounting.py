"""lpviz.accounting: thin wrappers over dp-accounting's Poisson-subsampled Gaussian."""

import numpy as np
import pytest
from dp_accounting import GaussianDpEvent, PoissonSampledDpEvent, SelfComposedDpEvent
from dp_accounting.pld import PLDAccountant
from dp_accounting.rdp import RdpAccountant

from lpviz import accounting


def _event(q, sigma, steps):
    return SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(sigma)), steps)


# -- the paper's setting ------------------------------------------------------


def test_reference_values_of_the_paper_setting():
    # Park et al. (2016), Wikipedia: q = 20,000 / 400,000, sigma = 1.24, one
    # epoch = 20 steps. dp-accounting 0.6.0: RDP 1.213, PLD 0.932 at delta
    # 1e-4 (the paper's own 2016 accountant said 2.44).
    assert round(accounting.epsilon(0.05, 1.24, 20, 1e-4, accountant="rdp"), 3) == 1.213
    assert round(accounting.epsilon(0.05, 1.24, 20, 1e-4, accountant="pld"), 3) == 0.932
    assert round(accounting.epsilon(0.05, 1.24, 20, 1e-4), 3) == 0.932  # PLD is the default


# -- equal to dp-accounting's own accountants ---------------------------------


@pytest.mark.parametrize(
    "q, sigma, steps, delta",
    [
        (0.01, 1.0, 100, 1e-5),
        (0.2, 3.0, 7, 1e-6),
        (1.0, 2.0, 1, 1e-5),
    ],
)
def test_rdp_matches_dp_accounting(q, sigma, steps, delta):
    expected = RdpAccountant().compose(_event(q, sigma, steps)).get_epsilon(delta)
    assert accounting.epsilon(q, sigma, steps, delta, accountant="rdp") == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    "q, sigma, steps, delta",
    [
        (0.01, 1.0, 100, 1e-5),
        (0.2, 3.0, 7, 1e-6),
    ],
)
def test_pld_matches_dp_accounting_default_grid_for_sigma_at_least_one(q, sigma, steps, delta):
    expected = PLDAccountant().compose(_event(q, sigma, steps)).get_epsilon(delta)
    assert accounting.epsilon(q, sigma, steps, delta, accountant="pld") == pytest.approx(expected, rel=1e-12)


def test_pld_widens_its_grid_below_sigma_one_and_stays_an_upper_bound():
    q, sigma, steps, delta = 0.02, 0.8, 5, 1e-5
    coarse = PLDAccountant(value_discretization_interval=1e-4 / sigma**2)
    fine = PLDAccountant()  # dp-accounting's default grid, 1.6x finer here
    ours = accounting.epsilon(q, sigma, steps, delta, accountant="pld")
    assert ours == pytest.approx(coarse.compose(_event(q, sigma, steps)).get_epsilon(delta), rel=1e-12)
    tight = fine.compose(_event(q, sigma, steps)).get_epsilon(delta)
    # both grids round the privacy loss up (pessimistic), the coarser one more
    assert tight <= ours <= tight * 1.02


def test_tiny_noise_does_not_exhaust_memory_with_pld():
    # dp-accounting's default grid would need 38 GiB here; ours stays small
    value = accounting.epsilon(0.05, 1e-3, 20, 1e-4, accountant="pld")
    assert np.isfinite(value) and value > 1e3


@pytest.mark.parametrize("accountant", ["rdp", "pld"])
def test_epsilon_after_each_step_equals_separate_calls(accountant):
    q, sigma, delta = 0.05, 1.24, 1e-4
    steps = [1, 3, 10, 20]
    curve = accounting.epsilon(q, sigma, steps, delta, accountant=accountant)
    assert isinstance(curve, np.ndarray) and curve.shape == (4,)
    assert np.all(np.diff(curve) > 0)
    # composing step by step gives what one call per count gives (PLD: the
    # last only, each PLD call costs a second)
    checked = steps if accountant == "rdp" else steps[-1:]
    separate = [accounting.epsilon(q, sigma, s, delta, accountant=accountant) for s in checked]
    assert curve[-len(checked) :] == pytest.approx(separate, rel=1e-8)


@pytest.mark.parametrize("accountant", ["rdp", "pld"])
def test_no_noise_is_no_privacy(accountant):
    assert accounting.epsilon(0.1, 0.0, 10, 1e-5, accountant=accountant) == np.inf
    assert np.all(accounting.epsilon(0.1, 0.0, [1, 2], 1e-5, accountant=accountant) == np.inf)


def test_epsilon_moves_the_right_way():
    base = accounting.epsilon(0.01, 1.0, 50, 1e-5, accountant="rdp")
    assert accounting.epsilon(0.01, 1.5, 50, 1e-5, accountant="rdp") < base  # more noise
    assert accounting.epsilon(0.01, 1.0, 100, 1e-5, accountant="rdp") > base  # more steps
    assert accounting.epsilon(0.02, 1.0, 50, 1e-5, accountant="rdp") > base  # larger batches
    assert accounting.epsilon(0.01, 1.0, 50, 1e-3, accountant="rdp") < base  # looser delta


# -- calibration inverts the accountant ---------------------------------------


@pytest.mark.parametrize("target", [0.5, 1.0, 4.0])
def test_rdp_calibration_inverts_epsilon(target):
    q, steps, delta = 0.01, 200, 1e-5
    sigma = accounting.noise_multiplier(target, delta, q, steps, accountant="rdp")
    spent = accounting.epsilon(q, sigma, steps, delta, accountant="rdp")
    # never over budget; under it by no more than the 1e-5 tolerance on sigma allows
    assert target * (1 - 1e-3) <= spent <= target
    # and minimal: 1e-4 less noise overspends
    assert accounting.epsilon(q, sigma * (1 - 1e-4), steps, delta, accountant="rdp") > target


def test_pld_calibration_inverts_epsilon():
    q, steps, delta, target = 0.05, 20, 1e-5, 0.3  # sigma ~ 2.9: a small, quick PLD grid
    sigma = accounting.noise_multiplier(target, delta, q, steps, accountant="pld")
    spent = accounting.epsilon(q, sigma, steps, delta, accountant="pld")
    assert target * (1 - 1e-3) <= spent <= target
    # PLD's epsilon moves in steps of its grid: check minimality at 1e-3 less noise
    assert accounting.epsilon(q, sigma * (1 - 1e-3), steps, delta, accountant="pld") > target
    # PLD is tighter than RDP, so it needs less noise for the same budget
    assert sigma < accounting.noise_multiplier(target, delta, q, steps, accountant="rdp")


def test_calibration_handles_budgets_needing_little_noise():
    sigma = accounting.noise_multiplier(50.0, 1e-5, 1.0, 3, accountant="rdp")
    assert sigma < 0.5
    assert accounting.epsilon(1.0, sigma, 3, 1e-5, accountant="rdp") <= 50.0


# -- bad arguments -----------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(sampling_rate=0.0), ValueError, "sampling_rate"),
        (dict(sampling_rate=1.5), ValueError, "sampling_rate"),
        (dict(sampling_rate="0.1"), ValueError, "sampling_rate"),
        (dict(noise_multiplier=-1.0), ValueError, "noise_multiplier"),
        (dict(noise_multiplier=np.inf), ValueError, "noise_multiplier"),
        (dict(steps=0), ValueError, "steps"),
        (dict(steps=2.5), TypeError, "steps"),
        (dict(steps=True), TypeError, "steps"),
        (dict(steps=[3, 2]), ValueError, "increasing"),
        (dict(steps=[0, 1]), ValueError, "increasing"),
        (dict(delta=0.0), ValueError, "delta"),
        (dict(delta=1.0), ValueError, "delta"),
        (dict(accountant="moments"), ValueError, "accountant"),
    ],
)
def test_epsilon_rejects_bad_arguments(kwargs, error, match):
    arguments = dict(sampling_rate=0.1, noise_multiplier=1.0, steps=10, delta=1e-5, accountant="rdp")
    arguments.update(kwargs)
    with pytest.raises(error, match=match):
        accounting.epsilon(**arguments)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(epsilon=0.0), ValueError, "epsilon"),
        (dict(epsilon=-1.0), ValueError, "epsilon"),
        (dict(epsilon=np.inf), ValueError, "epsilon"),
        (dict(delta=2.0), ValueError, "delta"),
        (dict(sampling_rate=0.0), ValueError, "sampling_rate"),
        (dict(steps=0), ValueError, "steps"),
        (dict(steps=[1, 2]), TypeError, "one integer"),
        (dict(accountant="gdp"), ValueError, "accountant"),
    ],
)
def test_noise_multiplier_rejects_bad_arguments(kwargs, error, match):
    arguments = dict(epsilon=1.0, delta=1e-5, sampling_rate=0.1, steps=10, accountant="rdp")
    arguments.update(kwargs)
    with pytest.raises(error, match=match):
        accounting.noise_multiplier(**arguments)
