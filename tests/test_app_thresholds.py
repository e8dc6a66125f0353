"""Issue 57 MEDIUM 12: one R-hat threshold, from one place. The preset texts said 1.05, the scoreboard's
footnote 1.1, and a row at R-hat 1.056 was flagged not mixed. Every threshold the dashboard's texts state
(presets, their claims, the teaching steps, the scoreboard's notes) is lpviz.metrics' RHAT_MIXED or
ESS_MIN, the ones score() flags by."""

import re

from lpviz.dashboard.session.presets import PRESETS
from lpviz.dashboard.views.fits_view import CHAINS_CONVERGENCE_NOTE, CONVERGENCE_NOTE
from lpviz.dashboard.views.teaching import STEPS
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
