"""lpviz: locally private Bayesian inference for count data.

Noise counts on the owner's side with the geometric mechanism
(:func:`privatize` gives a :class:`Release`), then fit Poisson factorization
models with a sampler that treats the true counts as latent (:func:`run`,
:func:`fit`, :class:`Chain` give a :class:`Posterior`) or by variational
inference (``inference="vi"``, :class:`VariationalFit`), beside the naive fit
that ignores the noise and the non-private fit on the :class:`Truth`; every
number comes from :func:`score`.

Submodules: :mod:`lpviz.privacy`, :mod:`lpviz.release`, :mod:`lpviz.bessel`,
:mod:`lpviz.models`, :mod:`lpviz.methods`, :mod:`lpviz.engine`, :mod:`lpviz.ensemble`,
:mod:`lpviz.metrics`, :mod:`lpviz.datasets`, :mod:`lpviz.vi`, :mod:`lpviz.reproduce`.
Attributes are imported lazily so ``import lpviz`` stays cheap (no Numba
compilation until a sampler is used).
"""

from importlib import import_module

from lpviz._kernel_cache import drop_stale_kernels

__version__ = "0.2.0"

drop_stale_kernels()  # before any kernel loads from Numba's cache

_ATTRIBUTES = {
    "alpha_from": "lpviz.privacy",
    "epsilon_from": "lpviz.privacy",
    "privatize": "lpviz.privacy",
    "heterogeneous_alpha": "lpviz.privacy",
    "truncate": "lpviz.privacy",
    "Release": "lpviz.release",
    "Truth": "lpviz.release",
    "Chain": "lpviz.engine",
    "Posterior": "lpviz.engine",
    "run": "lpviz.driver",
    "fit": "lpviz.driver",
    "score": "lpviz.metrics",
    "compare": "lpviz.comparison",
    "PrivateLDA": "lpviz.central",
    "VariationalFit": "lpviz.vi",
}
_SUBMODULES = {
    "privacy",
    "release",
    "bessel",
    "collapsed",
    "models",
    "methods",
    "engine",
    "ensemble",
    "stacking",
    "comparison",
    "inference",
    "metrics",
    "datasets",
    "accounting",
    "central",
    "budget",
    "vi",
    "reproduce",
}

__all__ = sorted(_ATTRIBUTES) + sorted(_SUBMODULES)


def __getattr__(name):
    if name in _ATTRIBUTES:
        return getattr(import_module(_ATTRIBUTES[name]), name)
    if name in _SUBMODULES:
        return import_module(f"lpviz.{name}")
    raise AttributeError(f"module 'lpviz' has no attribute {name!r}")


def __dir__():
    return __all__
