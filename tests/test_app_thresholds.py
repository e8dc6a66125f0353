"""Issue 57 MEDIUM 12: one R-hat threshold, from one place. The preset texts said 1.05, the scoreboard's
footnote 1.1, and a row at R-hat 1.056 was flagged not mixed. Every threshold the dashboard's texts state
(presets, their claims, the teaching steps, the scoreboard's notes) is lpviz.metrics' RHAT_MIXED or
ESS_MIN, the ones score() flags by."""

import re

from app.fits_view import CHAINS_CONVERGENCE_NOTE, CONVERGENCE_NOTE
from app.presets import PRESETS
from app.teaching import STEPS
from lpviz.metrics import ESS_MIN, RHAT_MIXED

# "R-hat ... above 1.05", "ESS below 100": a threshold stated (a measured value reads "R-hat 1.47")
THRESHOLD = re.compile(r"\b(R-hat|ESS)\b[^.]*?\b(above|below) (\d+(?:\.\d+)?)")


def texts():
    yield "the scoreboard's note", CONVERGENCE_NOTE
    yield "the scoreboard's note (chains)", CHAINS_CONVERGENCE_NOTE.format(chains=2)
    for preset in PRESETS.values():
        yield preset.name, preset.text
        if preset.claim is not None:
            yield f"{preset.name}'s claim", preset.claim.text
    for step in STEPS:
        yield step.title, step.text
        if step.claim is not None:
            yield f"{step.title}'s claim", step.claim.text


def test_every_stated_r_hat_and_ess_threshold_is_the_one_fits_are_flagged_by():
    stated = []
    for where, text in texts():
        for what, side, number in THRESHOLD.findall(text):
            stated.append((where, what, side, float(number)))
    assert any(what == "R-hat" for _, what, _, _ in stated), "no text states the R-hat threshold"
    wrong = [
        s
        for s in stated
        if (s[1], s[2]) == ("R-hat", "above")
        and s[3] != RHAT_MIXED
        or (s[1], s[2]) == ("ESS", "below")
        and s[3] != ESS_MIN
    ]
    assert wrong == [], wrong


def test_a_fit_flagged_not_mixed_names_the_check_it_failed():
    """Issue 57 MEDIUM 7: "the chains have not mixed (cross-chain R-hat 1.01, bulk ESS 69)" never named
    the ESS below 100 as the reason, and the footnote under it said R-hat near 1 means the chains agree."""
    from app.datastore import DataStore
    from app.fits import Fits
    from app.fits_view import board_frame, scoreboard_html
    from app.presets import check
    from app.settings import Settings

    name = "Figure 3 (small alpha0)"
    fits = Fits(DataStore(Settings(preset=name), background=False))
    reason = "the chains have not mixed (cross-chain R-hat 1.01, bulk ESS 69)"
    unmixed = {
        "rate_mae": 1.0,
        "rhat": 1.01,
        "ess": 69.0,
        "n_chains": 2,
        "health": {"healthy": False, "flags": ["not mixed"], "not_mixed": True, "reasons": [reason]},
        "baselines": {"best_constant_rate_mae": 10.0, "independence_rate_mae": 10.0},
    }
    try:
        for runner in fits.active.values():
            runner.param.update(status="done", result={"score": dict(unmixed)})
        named = f"{reason}: failing check: bulk ESS 69 below {ESS_MIN:g} (R-hat 1.01 passes: at most {RHAT_MIXED:g})"
        html = scoreboard_html(board_frame(list(fits.active.values())))
        assert named in html, html
        assert f"R-hat is above {RHAT_MIXED:g} or its ESS below {ESS_MIN:g}: either alone" in html  # the footnote
        verdict = check(PRESETS[name].claim, {m: unmixed for m in fits.active})
        assert verdict.held is False and named in verdict.text
    finally:
        fits.close()
