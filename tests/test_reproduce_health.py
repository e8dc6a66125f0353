"""Reproduce reports count no claim on a flagged fit: a collapsed, unmixed or non-finite fit (score()'s
health flags) turns every claim that compares its method into "not reproduced", says which fit and why,
and the report lists every flagged fit in a "Fit health" section."""

import pandas as pd

from lpviz.reproduce import report as rp
from lpviz.reproduce import reproduce


def _row(method, setting, flags, copy=0, chain=0):
    return {"method": method, "setting": setting, "copy": copy, "chain": chain, "health_flags": flags}


def _claim(methods, verdict=rp.REPRODUCED):
    return rp.Claim("private beats naive", "paper", "private 1.0, naive 2.0", verdict, "private below", methods)


def test_a_flagged_fit_unmakes_every_claim_that_compares_its_method():
    rows = [
        _row("private", "eps=1", ""),
        _row("naive", "eps=1", "not mixed: run longer", chain=1),
        _row("nonprivate", "true data", ""),
    ]
    on_naive, on_truth, declares_nothing = rp.gate_on_health(
        [_claim(("private", "naive")), _claim(("private", "nonprivate")), _claim(())], rows
    )
    assert on_naive.verdict == rp.NOT_REPRODUCED
    assert "naive (eps=1 copy 0 chain 1): not mixed: run longer" in on_naive.lpviz
    assert on_naive.lpviz.startswith("private 1.0, naive 2.0")  # the numbers stay, the reason is added
    assert "only when every fit of private, naive is healthy" in on_naive.rule
    assert on_truth == _claim(("private", "nonprivate"))  # no flagged fit among the ones it compares
    assert declares_nothing.verdict == rp.REPRODUCED


def test_fits_without_health_numbers_count_as_flagged_and_partial_verdicts_fall_too():
    rows = [_row("private", "eps=1", None), _row("naive", "eps=1", "")]
    [claim] = rp.gate_on_health([_claim(("private", "naive"), verdict=rp.PARTLY)], rows)
    assert claim.verdict == rp.NOT_REPRODUCED and "no health numbers" in claim.lpviz


def test_the_health_section_names_every_flagged_fit_or_says_all_are_healthy():
    healthy = [_row("private", "eps=1", ""), _row("naive", "eps=1", "")]
    heading, body = rp.health_section(healthy)
    assert heading == "Fit health" and body.startswith("Every fit is healthy") and "(2 fits)" in body
    flagged = healthy + [_row("naive", "eps=0.5", "collapsed"), _row("private", "eps=0.5", "not mixed: run longer")]
    _, body = rp.health_section(flagged)
    assert body.startswith("2 of 4 fits are flagged")
    assert "- naive (eps=0.5 copy 0 chain 0): collapsed" in body
    assert "- private (eps=0.5 copy 0 chain 0): not mixed: run longer" in body
    assert rp.health_section([{"method": "central", "perplexity": 3.0}]) is None  # fits not scored by score()


def test_a_real_report_gates_its_claims_on_the_fits_health(tmp_path):
    """fig1's tiny preset (short chains, 2 per setting): every claim whose methods have a flagged fit in
    tasks.csv is 'not reproduced' and names a flagged fit; the Fit health section lists each one."""
    [report] = reproduce("fig1", "tiny", scheduler="serial", output=tmp_path)
    text = report.read_text()
    rows = pd.read_csv(report.parent / "tasks.csv", keep_default_na=False)
    flagged = rows[rows["health_flags"] != ""]
    section = text[text.index("## Fit health") :]
    section = section[: section.index("\n## ", 3)]
    assert f"{len(flagged)} of {len(rows)} fits are flagged" in section or (
        flagged.empty and "Every fit is healthy" in section
    )
    for _, row in flagged.iterrows():
        assert f"- {row['method']} ({row['setting']} copy {row['copy']} chain {row['chain']}): " in section
    table = text[text.index("## Claims") : text.index("How each verdict")]
    claim_rows = [line for line in table.splitlines() if line.startswith("| ")][1:]
    flagged_methods = set(flagged["method"])
    compared = [("private", "naive"), ("private", "naive"), ("naive",)]  # fig1's claims, in order
    assert len(claim_rows) == len(compared)
    for line, methods in zip(claim_rows, compared, strict=True):
        if flagged_methods & set(methods):
            assert line.split("|")[-2].strip() == rp.NOT_REPRODUCED and "Not counted:" in line
        else:
            assert "Not counted:" not in line
