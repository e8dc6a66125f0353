"""Release and Truth: validation, the .npz schema, and what privatize puts in a release.

The noise law of both samplers is tested in test_privacy.py; here: which
sampler runs (exact unless seeded), what the release records about it, the
network diagonal, and the refusals of noise levels that are no noise at all.
"""

import zipfile

import numpy as np
import pytest

from lpviz import privacy
from lpviz.privacy import alpha_from, privatize
from lpviz.release import RELEASE_FORMAT, Release, Truth, format_alpha

Y = np.array([[3, 0, 1, 2], [0, 5, 2, 1], [1, 1, 0, 4]])
NETWORK = np.array([[0, 2, 1], [4, 0, 3], [1, 1, 0]])


def release(**fields):
    arguments = dict(Y_obs=Y - 1, alpha=0.5)
    arguments.update(fields)
    return Release(**arguments)


# ---------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fields, error, match",
    [
        (dict(Y_obs=np.arange(4)), ValueError, r"at least two modes \(rows x columns\), got shape \(4,\)"),
        (dict(Y_obs=np.ones((2, 2, 2), dtype=int), kind="documents"), ValueError, "order 3 is kind='tensor'"),
        (dict(Y_obs=Y, kind="tensor"), ValueError, "kind='tensor' needs an array of order 3 or more"),
        (dict(Y_obs=np.zeros((0, 4), dtype=int)), ValueError, r"empty \(shape \(0, 4\)\)"),
        (dict(Y_obs=Y + 0.5), TypeError, "integer counts, got dtype float64"),
        (dict(Y_obs=Y.astype(float)), TypeError, "integer counts"),
        (dict(Y_obs=Y > 0), TypeError, "integer counts, got dtype bool"),
        (dict(kind="graph"), ValueError, "kind must be one of 'documents', 'network', 'tensor'; got 'graph'"),
        (dict(kind="network"), ValueError, r"network must be square.*\(3, 4\)"),
        (dict(alpha=[0.5, 0.5]), ValueError, r"one value per row \(3\), got shape \(2,\)"),
        (dict(alpha=np.full((3, 1), 0.5)), ValueError, r"one value per row \(3\), got shape \(3, 1\)"),
        (dict(alpha=1.0), ValueError, "strictly between 0 and 1"),
        (dict(alpha=[0.5, 0.0, 0.5]), ValueError, "strictly between 0 and 1"),
        (dict(alpha="half"), TypeError, r"alpha must be a number in \(0, 1\)"),
        (dict(heldout=np.ones((3, 4), dtype=int)), TypeError, "heldout must be a boolean array"),
        (
            dict(heldout=np.ones((4, 3), dtype=bool)),
            ValueError,
            r"heldout has shape \(4, 3\) but Y_obs has shape \(3, 4\)",
        ),
        (dict(heldout=np.ones((3, 4), dtype=bool)), ValueError, "leave no cell to fit"),
        (dict(structural_zeros=np.eye(3, dtype=bool)), ValueError, "structural_zeros has shape"),
        (dict(structural_zeros=np.ones((3, 4))), TypeError, "structural_zeros must be a boolean array"),
        (dict(row_labels=["a", "b"]), ValueError, "row_labels has 2 labels but the matrix has 3"),
        (dict(col_labels=list("abcde")), ValueError, "col_labels has 5 labels but the matrix has 4"),
    ],
)
def test_bad_releases_are_refused_with_a_clear_message(fields, error, match):
    with pytest.raises(error, match=match):
        release(**fields)


def test_a_release_holds_read_only_copies():
    Y_obs, heldout = Y - 1, np.zeros(Y.shape, dtype=bool)
    heldout[0, 1] = True
    alpha = np.array([0.2, 0.4, 0.6])
    r = release(Y_obs=Y_obs, heldout=heldout, alpha=alpha, row_labels=[1, 2, 3])
    Y_obs[:] = 99
    heldout[:] = False
    alpha[:] = 0.9
    np.testing.assert_array_equal(r.Y_obs, Y - 1)
    assert r.heldout[0, 1] and r.heldout.sum() == 1
    np.testing.assert_array_equal(r.alpha, [0.2, 0.4, 0.6])
    for array in (r.Y_obs, r.heldout, r.alpha):
        with pytest.raises(ValueError, match="read-only"):
            array[0] = 0
    assert r.row_labels == ("1", "2", "3")  # labels are strings
    with pytest.raises(AttributeError):
        r.alpha = 0.1  # frozen


def test_cells_a_fit_sees_and_scores():
    heldout = np.zeros((3, 3), dtype=bool)
    heldout[0, :] = True  # row 0 held out, its diagonal cell included
    r = Release(Y_obs=NETWORK, alpha=0.3, kind="network", heldout=heldout)
    # a network's diagonal is a structural zero when none is given
    np.testing.assert_array_equal(r.structural_zeros, np.eye(3, dtype=bool))
    np.testing.assert_array_equal(r.observed_cells, ~heldout & ~np.eye(3, dtype=bool))
    held = r.heldout_cells
    assert held.sum() == 2 and not held[0, 0]  # the diagonal cell is never scored
    np.testing.assert_array_equal(r.alpha_per_row, [0.3, 0.3, 0.3])
    assert r.with_heldout(None).heldout is None and r.with_heldout(None).heldout_cells is None
    # holding out only cells that do not exist holds out nothing that can be scored
    assert r.with_heldout(np.eye(3, dtype=bool)).heldout_cells is None
    # documents have no structural zeros unless given; an all-False mask means none
    plain = release(heldout=np.zeros(Y.shape, dtype=bool))
    assert plain.structural_zeros is None and plain.heldout is None and plain.observed_cells.all()


def test_describe_says_what_the_noise_is():
    exact = Release(Y_obs=Y, alpha=alpha_from(1.0, 2.0), epsilon=1.0, N=2.0)
    assert exact.describe() == "3 x 4 documents, epsilon=1, N=2, alpha=0.6065; release (exact noise)"
    simulated = release(alpha=[0.1, 0.2, 0.3], simulated=True, noise_seed=7)
    assert simulated.describe().endswith("per-row alpha, mean 0.2 (from 0.1 to 0.3); simulation (noise seed 7)")
    assert format_alpha(1e-5) == "1.000e-05" and format_alpha(0.25) == "0.25"


def test_truth_checks_and_copies_the_counts():
    truth = Truth(Y, mu=Y + 0.5)
    assert truth.Y.dtype == np.int64 and not truth.Y.flags.writeable
    np.testing.assert_array_equal(truth.mu, Y + 0.5)
    import scipy.sparse as sp

    np.testing.assert_array_equal(Truth(sp.csr_matrix(Y)).Y, Y)
    with pytest.raises(ValueError, match=r"true rates have shape \(2, 2\) but the counts \(3, 4\)"):
        Truth(Y, mu=np.ones((2, 2)))
    with pytest.raises(ValueError, match="at least two modes"):
        Truth(np.arange(3))
    with pytest.raises(TypeError, match="must be integers"):
        Truth(Y > 0)


# ---------------------------------------------------------------------------
# The .npz schema
# ---------------------------------------------------------------------------


def test_save_and_load_round_trip_every_field(tmp_path):
    heldout = np.zeros(NETWORK.shape, dtype=bool)
    heldout[1, 2] = True
    zeros = np.eye(3, dtype=bool)
    zeros[2, 0] = True
    original = Release(
        Y_obs=NETWORK - 2,
        alpha=np.array([0.1, 0.5, 0.9]),
        epsilon=None,
        N=None,
        kind="network",
        heldout=heldout,
        structural_zeros=zeros,
        row_labels=["ann", "bob", "cy"],
        col_labels=["x", "y", "z"],
        simulated=True,
        noise_seed=12345678901,
        name="mail",
    )
    path = original.save(tmp_path / "release.npz", noise_seed=True)  # asked for: the seed is written
    loaded = Release.load(path)
    np.testing.assert_array_equal(loaded.Y_obs, original.Y_obs)
    assert loaded.Y_obs.dtype == original.Y_obs.dtype
    np.testing.assert_array_equal(loaded.alpha, original.alpha)
    np.testing.assert_array_equal(loaded.heldout, heldout)
    np.testing.assert_array_equal(loaded.structural_zeros, zeros)
    assert (loaded.kind, loaded.row_labels, loaded.col_labels) == ("network", ("ann", "bob", "cy"), ("x", "y", "z"))
    assert (loaded.epsilon, loaded.N, loaded.simulated, loaded.noise_seed, loaded.name) == (
        None,
        None,
        True,
        12345678901,
        "mail",
    )

    # scalar alpha with epsilon and N, no optional fields
    plain = Release(Y_obs=Y, alpha=alpha_from(2.0, 4.0), epsilon=2.0, N=4.0)
    again = Release.load(plain.save(tmp_path / "plain.npz"))
    assert isinstance(again.alpha, float) and again.alpha == plain.alpha
    assert (again.epsilon, again.N, again.kind, again.simulated, again.noise_seed, again.name) == (
        2.0,
        4.0,
        "documents",
        False,
        None,
        "",
    )
    assert again.heldout is None and again.structural_zeros is None and again.row_labels is None
    with np.load(tmp_path / "plain.npz", allow_pickle=False) as archive:
        assert str(archive["format"]) == RELEASE_FORMAT
        assert not {"heldout", "structural_zeros", "row_labels", "col_labels", "noise_seed"} & set(archive.files)


def test_save_refuses_to_overwrite_or_to_create_folders(tmp_path):
    path = release().save(tmp_path / "r.npz")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        release().save(path)
    release(alpha=0.25).save(path, overwrite=True)
    assert Release.load(path).alpha == 0.25
    with pytest.raises(FileNotFoundError, match="does not exist; create the folder first"):
        release().save(tmp_path / "no" / "such" / "r.npz")


def test_load_errors_are_clear_value_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        Release.load(tmp_path / "missing.npz")
    table = tmp_path / "noised.csv"
    table.write_text(",a,b\nr,1,2\n")
    with pytest.raises(ValueError, match="not an .npz release"):
        Release.load(table)
    counts = tmp_path / "counts.npz"
    np.savez(counts, Y=Y)
    with pytest.raises(ValueError, match=r"no noised counts 'Y_obs' in it \(it holds 'Y'\)"):
        Release.load(counts)
    no_alpha = tmp_path / "no_alpha.npz"
    np.savez(no_alpha, Y_obs=Y)
    with pytest.raises(ValueError, match="does not record its noise level 'alpha'"):
        Release.load(no_alpha)
    bad_alpha = tmp_path / "bad_alpha.npz"
    np.savez(bad_alpha, Y_obs=Y, alpha=1.5)
    with pytest.raises(ValueError, match="bad_alpha.npz: not a valid release: alpha must lie strictly"):
        Release.load(bad_alpha)
    pickled = tmp_path / "pickled.npz"
    np.savez(pickled, Y_obs=np.array([[object()]], dtype=object), alpha=0.5)
    with pytest.raises(ValueError, match="pickled.npz"):
        Release.load(pickled)
    broken = tmp_path / "broken.npz"
    with zipfile.ZipFile(broken, "w") as archive:
        archive.writestr("Y_obs.npy", b"not an array")
    with pytest.raises(ValueError, match="broken.npz"):
        Release.load(broken)


# ---------------------------------------------------------------------------
# privatize: which sampler, what the release records
# ---------------------------------------------------------------------------


def test_privatize_uses_the_exact_sampler_unless_seeded(monkeypatch):
    calls = []
    exact_sampler = privacy._geometric_noise_exact
    monkeypatch.setattr(privacy, "_geometric_noise_exact", lambda *a: calls.append("exact") or exact_sampler(*a))
    counts = np.random.default_rng(0).poisson(3.0, (20, 30))
    first, second = privatize(counts, epsilon=1.0), privatize(counts, epsilon=1.0)
    assert calls == ["exact", "exact"]
    assert not first.simulated and first.noise_seed is None
    # a secure generator: two releases of the same counts differ (600 cells, each equal with probability 0.28)
    assert not np.array_equal(first.Y_obs, second.Y_obs)
    assert (first.epsilon, first.N, first.alpha) == (1.0, 1.0, pytest.approx(np.exp(-1.0)))
    assert "release (exact noise)" in first.describe()


def test_a_seeded_privatize_is_a_reproducible_simulation(monkeypatch):
    monkeypatch.setattr(privacy, "_geometric_noise_exact", lambda *a: pytest.fail("the exact sampler ran"))
    counts = np.random.default_rng(1).poisson(3.0, (20, 30))
    a = privatize(counts, alpha=0.4, random_state=5)
    b = privatize(counts, alpha=0.4, random_state=5)
    np.testing.assert_array_equal(a.Y_obs, b.Y_obs)
    assert a.simulated and a.noise_seed == 5 and "simulation (noise seed 5)" in a.describe()
    assert not np.array_equal(a.Y_obs, privatize(counts, alpha=0.4, random_state=6).Y_obs)
    # a Generator seeds the simulation too, but no seed number can be recorded
    from_generator = privatize(counts, alpha=0.4, random_state=np.random.default_rng(5))
    assert from_generator.simulated and from_generator.noise_seed is None
    # exact=False without a seed: a simulation with a fresh seed, recorded so it can be replayed
    fresh = privatize(counts, alpha=0.4, exact=False)
    assert fresh.simulated and fresh.noise_seed is not None
    np.testing.assert_array_equal(fresh.Y_obs, privatize(counts, alpha=0.4, random_state=fresh.noise_seed).Y_obs)


def test_privatize_passes_the_public_fields_into_the_release():
    heldout = np.zeros(Y.shape, dtype=bool)
    heldout[2, 3] = True
    r = privatize(
        Y,
        epsilon=2.0,
        N=3.0,
        heldout=heldout,
        row_labels=["a", "b", "c"],
        col_labels=list("wxyz"),
        name="toy",
        random_state=0,
    )
    assert (r.epsilon, r.N, r.alpha) == (2.0, 3.0, pytest.approx(np.exp(-2.0 / 3.0)))
    np.testing.assert_array_equal(r.heldout, heldout)
    assert r.row_labels == ("a", "b", "c") and r.col_labels == tuple("wxyz") and r.name == "toy"
    assert r.kind == "documents" and r.structural_zeros is None
    # held-out cells are noised like any other (the release does not depend on the fit)
    plain = privatize(Y, epsilon=2.0, N=3.0, random_state=0)
    np.testing.assert_array_equal(r.Y_obs, plain.Y_obs)


@pytest.mark.parametrize("seeded", [True, False])
def test_network_diagonal_is_not_noised_and_is_a_structural_zero(seeded):
    counts = np.random.default_rng(2).poisson(4.0, (30, 30))
    np.fill_diagonal(counts, 0)
    r = privatize(counts, alpha=0.9, kind="network", random_state=3 if seeded else None)
    assert np.all(np.diag(r.Y_obs) == 0)
    np.testing.assert_array_equal(r.structural_zeros, np.eye(30, dtype=bool))
    off = ~np.eye(30, dtype=bool)
    # with alpha = 0.9 a cell stays un-noised with probability 0.05: the off-diagonal cells are noised
    assert np.mean(r.Y_obs[off] != counts[off]) > 0.8
    # a count on the diagonal (a self loop the data should not have) is not released either
    looped = counts.copy()
    np.fill_diagonal(looped, 7)
    assert np.all(np.diag(privatize(looped, alpha=0.9, kind="network", random_state=3).Y_obs) == 0)
    with pytest.raises(ValueError, match=r"network must be square.*\(3, 4\)"):
        privatize(Y, alpha=0.5, kind="network", random_state=0)


def test_release_fields_are_checked_before_any_noise_is_drawn(monkeypatch):
    def no_noise(*args):
        pytest.fail("noise was drawn before the release's fields were checked")

    monkeypatch.setattr(privacy, "_geometric_noise_exact", no_noise)
    monkeypatch.setattr(privacy, "_geometric_noise_fast", no_noise)
    for fields, match in [
        (dict(kind="graph"), "kind must be one of"),
        (dict(row_labels=["a"]), "row_labels has 1 labels"),
        (dict(heldout=np.ones((2, 2), dtype=bool)), "heldout has shape"),
        (dict(structural_zeros=np.ones(Y.shape)), "structural_zeros must be a boolean"),
    ]:
        for seed in (None, 0):
            with pytest.raises((ValueError, TypeError), match=match):
                privatize(Y, alpha=0.5, random_state=seed, **fields)


@pytest.mark.parametrize(
    "epsilon, N, match",
    [
        (800.0, 1, "so large that alpha = exp\\(-epsilon/N\\) underflows to 0"),
        (1e5, 10, "underflows to 0"),
        (1e-17, 1, "so small that alpha = exp\\(-epsilon/N\\) rounds to 1"),
        (1.0, 1e17, "rounds to 1"),
    ],
)
def test_privacy_levels_that_are_no_noise_or_all_noise_are_refused(epsilon, N, match):
    with pytest.raises(ValueError, match=match):
        alpha_from(epsilon, N)
    with pytest.raises(ValueError, match=match):
        privatize(Y, epsilon=epsilon, N=N, random_state=0)


def test_negligible_noise_is_refused_unless_allowed():
    # epsilon/N = 30 gives alpha = 9.4e-14: a cell is noised with probability 2e-13
    with pytest.raises(ValueError, match=r"alpha = 9.36e-14 \(epsilon/N = 30\).*allow_no_noise=True"):
        privatize(Y, epsilon=30.0, random_state=0)
    with pytest.raises(ValueError, match="allow_no_noise=True"):
        privatize(Y, alpha=[0.5, 1e-13, 0.5])  # one row is enough
    allowed = privatize(Y, epsilon=30.0, allow_no_noise=True)
    np.testing.assert_array_equal(allowed.Y_obs, Y)
    # just above the threshold the release is made
    assert privatize(Y, alpha=2e-12, random_state=0).alpha == 2e-12
