"""The one shape of lpviz's registries (models, methods, reproductions): a name -> entry table.

Each registry module keeps its public table (``MODELS``, ``METHODS``,
``EXPERIMENTS``: a plain dict the CLI, the app and the tests read) and its
``register``/``get`` functions; a :class:`Registry` does their work, so an
entry is checked, stored and looked up, and a wrong name refused, the same
way everywhere.
"""

__all__ = ["Registry", "one_of"]


def one_of(noun):
    """The usual refusal of an unknown name: ``"model must be one of 'topics', 'blocks'; got 'x'"``."""
    return lambda name, table: f"{noun} must be one of {', '.join(map(repr, table))}; got {name!r}"


class Registry:
    """``table`` filled by :meth:`register` with entries that pass ``accepts`` (TypeError naming
    ``takes`` otherwise), read by :meth:`get` (ValueError from ``unknown(name, table)``)."""

    def __init__(self, table, *, accepts, takes, unknown):
        self.table, self.accepts, self.takes, self.unknown = table, accepts, takes, unknown

    def register(self, entry):
        """Add ``entry`` under its ``name``; returns it (so it works as a class decorator)."""
        if not self.accepts(entry) or not getattr(entry, "name", None):
            raise TypeError(f"register() takes {self.takes}, got {entry!r}")
        self.table[entry.name] = entry
        return entry

    def get(self, name):
        """The entry registered as ``name``."""
        try:
            return self.table[name]
        except (KeyError, TypeError):
            raise ValueError(self.unknown(name, self.table)) from None

    @staticmethod
    def subclasses_of(base):
        """An ``accepts`` for classes derived from ``base``."""
        return lambda entry: isinstance(entry, type) and issubclass(entry, base)
