"""The models lpviz fits, one file each, in one registry.

A model is a :class:`~lpviz.models.base.Model` subclass: its factors,
priors, initial state, rates and the Numba kernels that allocate counts to
its components and update its factors over the observed cells. Adding a
model is one new file and one :func:`register` line below; the CLI choices,
the dashboard's selectors and the engine read :data:`MODELS`, and the
conformance suite (``tests/test_conformance.py``) runs every registered model.
"""

from lpviz._registry import Registry, one_of
from lpviz.models.base import Model, Work, contract_problems, matrix_shape

__all__ = [
    "MODELS",
    "Model",
    "Work",
    "register",
    "get",
    "create",
    "default_for",
    "fitting",
    "rates",
    "matrix_shape",
]

MODELS: dict[str, type[Model]] = {}
_REGISTRY = Registry(
    MODELS, accepts=Registry.subclasses_of(Model), takes="a Model subclass with a name", unknown=one_of("model")
)


def register(model_class):
    """Add a :class:`Model` subclass to the registry under its ``name``, after checking it
    implements the contract (:func:`lpviz.models.base.contract_problems`): a TypeError names
    every hook or declaration it lacks (a class that is no Model subclass, or has no name, is
    refused as every registry refuses it)."""
    if Registry.subclasses_of(Model)(model_class) and getattr(model_class, "name", None):
        problems = contract_problems(model_class)
        if problems:
            raise TypeError(f"cannot register model {model_class.__name__}: " + "; ".join(problems))
    return _REGISTRY.register(model_class)


def get(name):
    """The model class registered as ``name``."""
    return _REGISTRY.get(name)


def create(name, n_components, a0=0.1, b0=1.0):
    """An instance of the model ``name`` (or ``name`` itself when it is already a Model)."""
    if isinstance(name, Model):
        return name
    return get(name)(n_components, a0=a0, b0=b0)


def default_for(kind):
    """The name of the model that fits data of ``kind`` by default."""
    for name, model_class in MODELS.items():
        if kind in model_class.default_for:
            return name
    raise ValueError(f"no model fits data of kind {kind!r} by default; pass model= explicitly")


def fitting(kind):
    """The names of the models that fit data of ``kind``, the default first."""
    names = [name for name, model_class in MODELS.items() if kind in model_class.kinds]
    return sorted(names, key=lambda name: kind not in MODELS[name].default_for)


def rates(model, factors):
    """The Poisson rates of every cell for a factor dict of the model named ``model``."""
    model_class = get(model)
    n_components = next(iter(factors.values())).shape[-1]
    return model_class(n_components).rates(factors)


from lpviz.models.blocks import BlockModel  # noqa: E402
from lpviz.models.tensor import TensorModel  # noqa: E402
from lpviz.models.topics import TopicModel  # noqa: E402

register(TopicModel)
register(BlockModel)
register(TensorModel)
