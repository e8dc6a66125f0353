"""Every preset's lesson is a checked claim: run at its class seed, exactly as a student runs it
(the dashboard's own chains, in-process), the Fits tab's verdict on it must be "held".

The check itself (lpviz.dashboard.session.presets.check) is tested on hand-made scores: a flagged fit never counts,
the winner must beat the trivial baselines, a wrong order or a wide spread does not hold.
"""

import time

import pytest

from lpviz.dashboard.session.datastore import DataStore
from lpviz.dashboard.session.fits import Fits
from lpviz.dashboard.session.presets import CLASS_SEED, PRESETS, Claim, check
from lpviz.dashboard.session.settings import Settings
from lpviz.dashboard.views.fits_view import FitsView

TIMEOUT = 900  # seconds per preset on a loaded 2-core machine


def run_preset(name, then=None, **settings):
    """Run preset ``name`` to its end as a student does; ``then``: settings the student changes after
    choosing it (the preset's claim no longer applies then)."""
    fits = Fits(DataStore(Settings(preset=name, **settings), background=False), buffer_length=10_000)
    assert fits.data.error == "", fits.data.error
    view = FitsView(fits=fits)
    assert view.claim_verdict().held is None  # nothing run: nothing claimed yet
    if then:
        fits.settings.param.update(**then)
    fits.start()
    deadline = time.monotonic() + TIMEOUT
    while any(runner.status in ("running", "pausing") for runner in fits.runners.values()):
        assert time.monotonic() < deadline, "the preset's fits did not finish"
        time.sleep(0.1)
        fits.drain()
    for runner in fits.runners.values():
        runner.join(timeout=30)
    fits.drain()
    view._update_scores()
    return fits, view


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_presets_claim_holds_at_its_class_seed(name, enron_tarball):
    fits, view = run_preset(name, path=str(enron_tarball))
    try:
        assert fits.settings.noise_seed == CLASS_SEED and fits.data.release.noise_seed == CLASS_SEED
        assert all(runner.status == "done" for runner in fits.active.values()), {
            m: (r.status, r.error) for m, r in fits.active.items()
        }
        verdict = view.claim_verdict()
        assert verdict.held is True, f"{name}: {PRESETS[name].claim.text} -> {verdict.text}"
        html = view.claim_html(verdict, name, fits.settings.noise_seed)
        assert "Held" in html and PRESETS[name].claim.text in html and "not the class seed" not in html
    finally:
        fits.close()


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PRESETS))
def test_every_presets_claim_holds_with_four_chains(name, enron_tarball, monkeypatch):
    """Issue 54: a lesson must not rest on the class seed's two chains; with four per method (the
    library's ensembles) every claim still holds (--runslow: Figure 1's 30,000 iterations times four).
    The preset itself runs four (a Chains typed by hand would leave the preset and its claim)."""
    monkeypatch.setitem(PRESETS[name].settings, "chains", 4)
    fits, view = run_preset(name, path=str(enron_tarball))
    if PRESETS[name].settings["inference"] == "mcmc":
        assert all(((r.result or {}).get("score") or {}).get("n_chains") == 4 for r in fits.active.values())
    try:
        verdict = view.claim_verdict()
        assert verdict.held is True, f"{name} with 4 chains: {PRESETS[name].claim.text} -> {verdict.text}"
    finally:
        fits.close()


def test_figure5_with_one_chain_raises_no_flag_its_two_chains_raise(enron_tarball):
    """Figure 5's text: with Chains set to 1 the private chain's split R-hat passes and nothing warns
    (the preset's own run, two chains, is flagged: the claim test above)."""
    fits, _ = run_preset("Figure 5", then={"chains": 1}, path=str(enron_tarball))
    try:
        private = fits.active["private"].result["score"]
        assert private.get("n_chains", 1) == 1 and private["health"]["healthy"], private["health"]
        assert private["rhat"] <= 1.05
    finally:
        fits.close()


def _scores(value, *, healthy=True, not_mixed=False, constant=10.0):
    flags = [] if healthy else (["not mixed"] if not_mixed else ["collapsed"])
    return {
        "mae": value,
        "health": {
            "healthy": healthy,
            "flags": flags,
            "not_mixed": not_mixed,
            "reasons": [] if healthy else ["the chain has not mixed (R-hat, ESS)"],
        },
        "baselines": {"best_constant_mae": constant, "independence_mae": constant},
    }


def test_the_check_holds_only_for_healthy_fits_in_the_claimed_order():
    beats = Claim("a beats b", "mae", better=("private",), worse=("naive",))
    assert check(beats, {"private": _scores(1.0), "naive": _scores(2.0)}).held is True
    assert check(beats, {"private": _scores(2.0), "naive": _scores(1.0)}).held is False
    assert check(beats, {"private": _scores(1.0)}).held is None  # naive not run yet
    unmixed = check(beats, {"private": _scores(1.0, healthy=False, not_mixed=True), "naive": _scores(2.0)})
    assert unmixed.held is False and "Run longer" in unmixed.text and "never counts" in unmixed.text
    collapsed = check(beats, {"private": _scores(1.0), "naive": _scores(2.0, healthy=False)})
    assert collapsed.held is False  # the loser flagged: the comparison does not count either
    trivial = check(beats, {"private": _scores(1.0, constant=0.5), "naive": _scores(2.0, constant=0.5)})
    assert trivial.held is False and "baselines" in trivial.text  # a constant rate does better
    close = Claim("all close", "mae", close=("private", "naive"), tolerance=0.15)
    assert check(close, {"private": _scores(1.0), "naive": _scores(1.1)}).held is True
    assert check(close, {"private": _scores(1.0), "naive": _scores(1.2)}).held is False
    diagnostics = Claim("not mixed", "mae", not_mixed=("private",))
    assert check(diagnostics, {"private": _scores(1.0, healthy=False, not_mixed=True)}).held is True
    assert check(diagnostics, {"private": _scores(1.0)}).held is False
    # ... and the others mixed: a flagged one (collapsed or not mixed) breaks the lesson
    beside = Claim("private not mixed, naive fine", "mae", not_mixed=("private",), healthy=("naive",))
    unmixed_private = _scores(1.0, healthy=False, not_mixed=True)
    assert check(beside, {"private": unmixed_private, "naive": _scores(2.0)}).held is True
    assert check(beside, {"private": unmixed_private}).held is None  # naive not run yet
    for naive in (_scores(2.0, healthy=False), _scores(2.0, healthy=False, not_mixed=True)):
        verdict = check(beside, {"private": unmixed_private, "naive": naive})
        assert verdict.held is False and "they are flagged" in verdict.text


def test_a_new_noise_draw_keeps_the_preset_and_says_its_numbers_are_not_the_class_seeds():
    settings = Settings(preset="Figure 3 (small alpha0)")
    assert settings.noise_seed == CLASS_SEED
    settings.redraw_noise()
    assert settings.noise_seed != CLASS_SEED and settings.preset == "Figure 3 (small alpha0)"
    fits = Fits(DataStore(settings, background=False))
    view = FitsView(fits=fits)
    assert fits.data.release.noise_seed == settings.noise_seed
    html = view.claim_html(view.claim_verdict(), settings.preset, settings.noise_seed)
    assert f"seed {settings.noise_seed}, not the class seed {CLASS_SEED}" in html
    settings.preset = ""
    settings.preset = "Figure 3 (small alpha0)"  # chosen again: the class seed again
    assert settings.noise_seed == CLASS_SEED and fits.data.release.noise_seed == CLASS_SEED
    fits.close()


def test_every_teaching_steps_claim_holds_on_the_opening_preset_at_the_class_seed():
    """Teaching mode on the dashboard's opening session: each step that claims a finding is run and
    its claim checked on screen (held), the scoreboard step starting the fits itself."""
    import panel as pn

    from lpviz.dashboard.session.default import default_session
    from lpviz.dashboard.views.teaching import STEPS, Teaching

    fits = default_session()
    fits.data._background = False
    try:
        teaching = Teaching(fits=fits)
        # the sweep step's claim rests on the default epsilon sweep, not on these fits: it is run and
        # checked through the step by test_app_sweep's test of the default sweep
        claimed = [i for i, step in enumerate(STEPS) if step.claim is not None and not step.starts_sweep]
        assert claimed, "no teaching step claims anything about the fits"
        for index in claimed:
            teaching.go(index)
            if fits.settings.pending:  # a step that loads its preset asks before it discards the fits shown
                assert STEPS[index].preset and fits.settings.pending == {"preset": STEPS[index].preset}
                fits.settings.confirm()
            deadline = time.monotonic() + TIMEOUT
            while any(runner.status in ("running", "pausing") for runner in fits.runners.values()):
                assert time.monotonic() < deadline
                time.sleep(0.1)
                fits.drain()
            for runner in fits.runners.values():
                runner.join(timeout=30)
            fits.drain()
            teaching._check_claim()
            assert teaching.verdict.held is True, f"step {index + 1}: {teaching.verdict.text}"
            shown = teaching._text()
            assert isinstance(shown, pn.pane.Markdown) and "**held**" in shown.object
    finally:
        fits.close()


def test_the_two_modes_lesson_needs_its_seed():
    """Power: on the same data at a chain seed where the two chains agree, the lesson does not hold
    (the check is not always true); at the preset's seed the library's own fit flags and names the chain."""
    from lpviz import fit, methods
    from lpviz.dashboard.session.presets import TWO_MODES
    from lpviz.metrics import score

    store = DataStore(Settings(preset=TWO_MODES.name), background=False)
    settings = store.settings
    verdicts = {}
    for seed in (settings.chain_seed, 1):
        method = methods.create("private", **settings.options_for(methods.get("private")))
        ensemble = fit(
            store.release, method=method, n_components=settings.n_components, n_iter=settings.n_iter,
            burn_in=settings.burn_in, thin=settings.thin, random_state=seed, chains=settings.chains,
        )  # fmt: skip
        verdicts[seed] = check(TWO_MODES.claim, {"private": score(ensemble, store.release, store.truth)})
    assert verdicts[settings.chain_seed].held is True and "chain 1 apart" in verdicts[settings.chain_seed].text
    assert verdicts[1].held is False and "agree" in verdicts[1].text


def test_the_two_modes_lesson_states_what_stacking_gives_and_fails_when_it_does_not():
    """Issue 54's lesson in the preset and teaching step 7: stacking (the noised cells only) weighs
    the private chains unequally and its rates are closer to the true counts than the equal pool.
    Checked on the library's own fit at the preset's seed; power: the same scores with the pooled MAE
    below the stacked, or with weights near equal, do not hold."""
    from lpviz import fit, methods
    from lpviz.dashboard.session.presets import TWO_MODES, stacked_weight_min
    from lpviz.metrics import score

    store = DataStore(Settings(preset=TWO_MODES.name), background=False)
    settings = store.settings
    method = methods.create("private", **settings.options_for(methods.get("private")))
    ensemble = fit(
        store.release, method=method, n_components=settings.n_components, n_iter=settings.n_iter,
        burn_in=settings.burn_in, thin=settings.thin, random_state=settings.chain_seed, chains=settings.chains,
    )  # fmt: skip
    scores = score(ensemble, store.release, store.truth)
    verdict = check(TWO_MODES.claim, {"private": scores})
    weights = scores["stacking_weights"]
    assert verdict.held is True and max(weights) >= stacked_weight_min(len(weights)) == 0.6, verdict.text
    assert scores["stacked_mae"] < scores["mae"]
    assert f"MAE stacked {scores['stacked_mae']:.3g} below pooled {scores['mae']:.3g}" in verdict.text
    closer_pooled = dict(scores, mae=scores["stacked_mae"] * 0.99)
    verdict = check(TWO_MODES.claim, {"private": closer_pooled})
    assert verdict.held is False and "no closer to the true counts than the pooled" in verdict.text
    equal = dict(scores, stacking_weights=[0.55, 0.45])
    verdict = check(TWO_MODES.claim, {"private": equal})
    assert verdict.held is False and "about equally" in verdict.text
    waiting = dict(scores, stacking_weights=None)
    assert check(TWO_MODES.claim, {"private": waiting}).held is None


def test_the_stacking_rule_is_one_for_any_number_of_chains():
    """Unequal means the largest weight is at least 1.2 times an equal share: 0.6 of two chains, 0.3 of
    four. The four-chain walk's weights 0.54 / 0.13 / 0.00 / 0.33 are unequal (a two-chain 0.6 called them
    equal); four near-equal weights are not, nor two at 0.55 / 0.45."""
    from lpviz.dashboard.session.presets import _stacked, stacked_weight_min

    assert stacked_weight_min(2) == 0.6 and stacked_weight_min(4) == 0.3
    scores = {"stacking_weights": [0.54, 0.13, 0.0, 0.33], "stacked_mae": 5.0, "mae": 5.5}
    held, words = _stacked("private", scores)
    assert held is True and words == "stacking weights 0.54 / 0.13 / 0.00 / 0.33, MAE stacked 5 below pooled 5.5"
    for weights in ([0.28, 0.26, 0.24, 0.22], [0.55, 0.45]):
        held, words = _stacked("private", dict(scores, stacking_weights=weights))
        assert held is False and "about equally" in words


def _finished_fits(preset, status, iteration, target):
    """A session on ``preset`` whose chosen fits all read ``status`` at ``iteration`` of ``target``,
    each with healthy scores that hold the preset's claim (Figure 3 small: all three MAEs close)."""
    fits = Fits(DataStore(Settings(preset=preset), background=False))
    score = {
        "rate_mae": 1.0,
        "health": {"healthy": True, "flags": [], "not_mixed": False, "reasons": []},
        "baselines": {"best_constant_rate_mae": 10.0, "independence_rate_mae": 10.0},
    }
    for runner in fits.active.values():
        runner.param.update(status=status, iteration=iteration, target=target, result={"score": dict(score)})
    return fits


def test_a_claim_is_checked_only_on_a_run_that_reached_its_goal():
    """Issue 57 HIGH 2: the one rule (lpviz.dashboard.session.presets.unfinished), for the Fits tab, the export and the
    teaching steps: a run stopped before its goal is never given a verdict; the page says in words
    that the claim is not checked and why. Before, a stopped run was checked as if finished."""
    from lpviz.dashboard.views.fits_view import preset_verdict

    name = "Figure 3 (small alpha0)"
    fits = _finished_fits(name, "done", 6000, 6000)
    try:
        assert preset_verdict(fits).held is True  # the full run: checked
    finally:
        fits.close()
    fits = _finished_fits(name, "stopped", 2052, 6000)
    try:
        verdict = preset_verdict(fits)
        assert verdict.held is None and verdict.word == "not checked", verdict
        assert verdict.text == "the run was stopped at 2,052 of 6,000 iterations; the claim is about the full run"
        html = FitsView(fits=fits).claim_html(verdict, name, fits.settings.noise_seed)
        assert "Not checked</b>: the run was stopped at 2,052 of 6,000 iterations" in html
        assert "Held" not in html and "Did not hold" not in html
    finally:
        fits.close()


def _ensemble_scores(chain_maes, *, flags=("not mixed",), constant=1.0):
    return {
        "mae": sum(chain_maes) / len(chain_maes),
        "chains": [{"mae": value} for value in chain_maes],
        "health": {"healthy": not flags, "flags": list(flags), "not_mixed": "not mixed" in flags, "reasons": []},
        "baselines": {"best_constant_mae": constant},
    }


def test_every_chain_claims_count_unmixed_chains_and_need_every_chain_below_every_chain():
    claim = Claim(
        "every private chain below every naive chain", "mae", not_mixed=("private",), every_chain=("private", "naive")
    )
    held = check(claim, {"private": _ensemble_scores([0.2, 0.3]), "naive": _ensemble_scores([0.4, 0.5])})
    assert held.held is True and "unmixed chains included" in held.text
    # one naive chain below one private chain (power: the pooled MAEs still order the same way)
    crossed = check(claim, {"private": _ensemble_scores([0.2, 0.45]), "naive": _ensemble_scores([0.4, 0.7])})
    assert crossed.held is False and "not every chain below every chain" in crossed.text
    # every chain below, but not below the best constant
    above = check(
        claim, {"private": _ensemble_scores([0.2, 0.3], constant=0.25), "naive": _ensemble_scores([0.4, 0.5])}
    )
    assert above.held is False and "does not beat the best constant's 0.25" in above.text
    # a collapsed fit never counts; a private fit that mixed makes the lesson not apply
    broken = check(claim, {"private": _ensemble_scores([0.2], flags=("collapsed",)), "naive": _ensemble_scores([0.4])})
    assert broken.held is False and "collapsed" in broken.text
    mixed = check(claim, {"private": _ensemble_scores([0.2, 0.3], flags=()), "naive": _ensemble_scores([0.4, 0.5])})
    assert mixed.held is False and "did mix" in mixed.text
    assert check(claim, {"private": _ensemble_scores([0.2]), "naive": {}}).held is None
