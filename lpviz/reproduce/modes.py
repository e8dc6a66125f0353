"""Findings that survive the modes, for the reports of experiments on real data (issue 54).

On real data a setting's chains sit in separate modes, "not mixed" flags every fit, and a claim gated
on health states nothing. Two rules still say what holds (DESIGN.md 1f; :mod:`lpviz.comparison`):

- **chain by chain** (with the truth): in a setting, on every noised copy, every chain of one method
  has a lower MAE than every chain of the other, and below the best constant's;
- **on the held-out noised cells** (without the truth): each method's chains stacked on their
  predictive densities of the held-out noised cells (``heldout_lpd``, kept by each task), and the
  methods ranked by :func:`lpviz.comparison.rank_pointwise`: more than ``RANK_SES`` standard errors
  on every copy.

A collapsed or non-finite fit counts for neither: the setting is not counted, in words.
"""

from lpviz.comparison import RANK_SES, rank_pointwise
from lpviz.stacking import stack_chains

__all__ = ["SILENCING", "chain_by_chain", "heldout_ranking", "setting_key"]

# health flags that keep a fit out of every finding (its numbers mean nothing); not mixed does not
SILENCING = ("collapsed", "non-finite")


def setting_key(row, keys):
    return tuple(row.get(key) for key in keys)


def _silenced(rows):
    words = []
    for row in rows:
        flags = str(row.get("health_flags") or "")
        if any(flag in flags for flag in SILENCING):
            words.append(f"{row.get('method')} copy {row.get('copy')} chain {row.get('chain')}: {flags}")
    return words


def chain_by_chain(rows, keys, better, worse, metric="mae"):
    """Per setting (``keys`` of the rows): ``{setting: (holds, words)}``, whether on every noised copy
    every chain of ``better`` has a lower ``metric`` than every chain of ``worse``, with the numbers."""
    out = {}
    for setting in sorted({setting_key(row, keys) for row in rows if row.get("method") in (better, worse)}):
        mine = [row for row in rows if setting_key(row, keys) == setting and row.get(metric) is not None]
        silenced = _silenced([row for row in mine if row["method"] in (better, worse)])
        copies = sorted({row.get("copy") for row in mine})
        per_copy = []
        for copy in copies:
            a = [row[metric] for row in mine if row["method"] == better and row.get("copy") == copy]
            b = [row[metric] for row in mine if row["method"] == worse and row.get("copy") == copy]
            if a and b:
                per_copy.append((max(a) < min(b), min(a), max(a), min(b), max(b)))
        if silenced or not per_copy:
            out[setting] = (False, "not counted: " + ("; ".join(silenced) if silenced else "no chains to compare"))
            continue
        holds = all(check for check, *_ in per_copy)
        low, high = min(p[1] for p in per_copy), max(p[2] for p in per_copy)
        other_low, other_high = min(p[3] for p in per_copy), max(p[4] for p in per_copy)
        verb = "every chain below every chain" if holds else "not every chain below every chain"
        words = f"{better} {low:.3g}-{high:.3g} vs {worse} {other_low:.3g}-{other_high:.3g}: {verb}"
        constants = [row.get(f"best_constant_{metric}") for row in mine if row["method"] == better]
        constant = max((c for c in constants if c is not None), default=None)
        if constant is None:
            holds, words = False, words + f"; not counted: no best constant's {metric}"
        elif not high < constant:
            holds, words = (
                False,
                words + f"; not counted: {better}'s {high:.3g} does not beat the best constant's {constant:.3g}",
            )
        else:
            words += f", below the best constant's {constant:.3g}"
        out[setting] = (holds, words)
    return out


def heldout_ranking(results, rows, keys, better, worse):
    """Per setting: ``(holds, words)``, whether ``better``'s stacked chains predict the held-out noised
    cells better than ``worse``'s by more than RANK_SES standard errors on every noised copy (no truth),
    with the elpds; None when the tasks kept no held-out densities (nothing held out)."""
    densities = {}
    for (_record, arrays), row in zip(results, rows, strict=True):
        if "heldout_lpd" in arrays and row.get("method") in (better, worse):
            key = (setting_key(row, keys), row["method"], row.get("copy"))
            densities.setdefault(key, []).append((row.get("chain") or 0, arrays["heldout_lpd"]))
    if not densities:
        return None
    out = {}
    for setting in sorted({key[0] for key in densities}):
        silenced = _silenced(
            [row for row in rows if setting_key(row, keys) == setting and row["method"] in (better, worse)]
        )
        copies = sorted({key[2] for key in densities if key[0] == setting})
        pointwise = {better: [], worse: []}
        for copy in copies:
            for method in (better, worse):
                chains = [lpd for _, lpd in sorted(densities.get((setting, method, copy), []), key=lambda c: c[0])]
                if chains:
                    pointwise[method].append(stack_chains(chains)[1])
        if silenced or len(pointwise[better]) != len(pointwise[worse]) or not pointwise[better]:
            out[setting] = (False, "not counted: " + ("; ".join(silenced) if silenced else "no held-out densities"))
            continue
        table = rank_pointwise(pointwise)
        holds = any(
            s.startswith(f"{better} predicts the held-out noised cells better than {worse}")
            for s in table.attrs["statements"]
        )
        diff = float(table.loc[better, "elpd"] - table.loc[worse, "elpd"])
        dse = float(table["dse"].max())
        verdict = f"more than {RANK_SES:g} se on every copy" if holds else f"not {RANK_SES:g} se on every copy"
        out[setting] = (
            holds,
            f"elpd {better} {table.loc[better, 'elpd']:,.1f} vs {worse} {table.loc[worse, 'elpd']:,.1f} "
            f"(difference {diff:,.1f}, se {dse:,.1f}; {len(copies)} cop{'ies' if len(copies) > 1 else 'y'}): {verdict}",
        )
    return out
