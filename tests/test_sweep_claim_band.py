"""Issue 57 MEDIUM 11: the teaching sweep step's claim held at eps/N 2 by 0.3% (private's count MAE
1.152 against naive's 1.155), inside the range of its own noise draws (1.149-1.153 against
1.153-1.156). A claim inside the band of its draws is not held: at each epsilon / N every draw of the
methods claimed better must beat every draw of those claimed worse (the better's largest score below
the worse's smallest)."""

from tests.test_app_sweep import make_view
from tests.test_sweep import _point


def finished(view, rows, claim):
    from lpviz.reproduce.sweep import sweep_frame

    view.param.update(points=sweep_frame(rows), state="finished")
    return view.verdict(claim)


def test_a_sweep_claim_inside_its_noise_draws_band_is_not_held():
    from lpviz.dashboard.views.teaching import STEPS

    claim = next(step.claim for step in STEPS if step.starts_sweep)
    key = claim.key
    view = make_view(n_draws=3)
    better, worse = claim.better[0], claim.worse[0]

    def rows(overlapping):
        out = []
        for ratio in (0.5, 1.0, 2.0):
            apart = ratio != 2.0 or not overlapping
            values = {better: (1.149, 1.152, 1.153), worse: (1.153, 1.155, 1.156) if not apart else (1.3, 1.31, 1.32)}
            for method in (better, worse):
                for draw, value in enumerate(values[method]):
                    point = _point(method, ratio, draw, 1.0)
                    point["mae"] = float("nan") if key != "mae" else point["mae"]
                    point[key] = value
                    out.append(point)
        return out

    # the means are in the claimed order at every level, but at 2 the draws' ranges touch
    verdict = finished(view, rows(overlapping=True), claim)
    assert verdict.held is False, verdict.text
    assert "epsilon / N = 2" in verdict.text and "noise draws" in verdict.text, verdict.text
    # apart at every level: held, the ranges said
    verdict = finished(view, rows(overlapping=False), claim)
    assert verdict.held is True, verdict.text
    assert "1.149-1.153" in verdict.text, verdict.text
