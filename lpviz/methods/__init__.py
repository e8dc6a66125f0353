"""The inference methods lpviz runs, one file each, in one registry.

A method is a :class:`~lpviz.methods.base.Method` subclass: what it sees of a
release and its latent step. Adding a method is one new file and one
:func:`register` line below; the CLI choices, the dashboard's selectors,
labels and colours all read :data:`METHODS`.
"""

from lpviz._registry import Registry, one_of
from lpviz.methods.base import Exclusions, Method, Prepared

__all__ = ["METHODS", "Method", "Exclusions", "Prepared", "register", "get", "create"]

METHODS: dict[str, type[Method]] = {}
_REGISTRY = Registry(
    METHODS, accepts=Registry.subclasses_of(Method), takes="a Method subclass with a name", unknown=one_of("method")
)


def register(method_class):
    """Add a :class:`Method` subclass to the registry under its ``name``."""
    return _REGISTRY.register(method_class)


def get(name):
    """The method class registered as ``name``."""
    return _REGISTRY.get(name)


def create(name, **options):
    """An instance of the method ``name`` with its options (None = the default);
    ``name`` may already be a Method instance."""
    if isinstance(name, Method):
        if any(value is not None for value in options.values()):
            raise ValueError("options go to the method's constructor when a Method instance is given")
        return name
    method_class = get(name)
    for option, value in options.items():
        if value is not None and option not in method_class.options:
            raise ValueError(
                f"{option}={value!r} applies to methods with that option "
                f"({', '.join(n for n, m in METHODS.items() if option in m.options) or 'none'}), "
                f"not to method={name!r}"
            )
    return method_class(**{k: v for k, v in options.items() if k in method_class.options})


from lpviz.methods.naive import Naive  # noqa: E402
from lpviz.methods.nonprivate import NonPrivate  # noqa: E402
from lpviz.methods.private import Private  # noqa: E402

register(Private)
register(Naive)
register(NonPrivate)
