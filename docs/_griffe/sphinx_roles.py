"""Griffe extension: lpviz's docstrings cross-reference with Sphinx roles
(``:func:`run```, ``:class:`~lpviz.engine.Chain```); mkdocstrings reads Markdown.

Each role becomes a Markdown cross-reference ``[`name`][full.path]`` that
mkdocs-autorefs links to the object's entry in the API reference, with the name
resolved in the scope of the object whose docstring holds it (the module's
imports and members, as Python would). A role naming an lpviz object that does
not exist is a stale reference: it is logged as a warning, which
``mkdocs build --strict`` turns into an error. Names outside lpviz (numpy,
distributed) and lpviz's private helpers (``_name``: not in the reference) stay
plain code, and so do objects without a docstring of their own (constants:
the reference shows only what is documented).
"""

import logging
import re
from importlib import import_module

import griffe

logger = logging.getLogger("mkdocs.plugins.lpviz_sphinx_roles")

# :func:`name`, :class:`~a.b.C`, :py:meth:`C.m`, :data:`X`, ...
ROLE = re.compile(r":(?:py:)?(?P<role>func|class|meth|mod|data|attr|exc|obj|const):`(?P<target>[^`]+)`")
PACKAGE = "lpviz"


def _lookup(package, path):
    """The object at dotted ``path`` (``lpviz.x.y``) in the loaded package, or None."""
    if path == PACKAGE:
        return package
    if not path.startswith(PACKAGE + "."):
        return None
    relative = path[len(PACKAGE) + 1 :]
    head, _, rest = relative.partition(".")
    # lpviz.fit, lpviz.Release, ...: the package's lazy attributes (lpviz.__getattr__)
    lazy = import_module(PACKAGE)._ATTRIBUTES
    if head in lazy:
        relative = lazy[head][len(PACKAGE) + 1 :] + "." + relative
    try:
        return package[relative]
    except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError):
        return None


def _resolve(package, scope, name):
    """The object ``name`` names as seen from ``scope`` (an object), or None."""
    head, _, rest = name.partition(".")
    candidates = []
    if name.startswith(PACKAGE + ".") or name == PACKAGE:
        candidates.append(name)
    else:
        try:
            candidates.append(scope.resolve(head) + ("." + rest if rest else ""))
        except (griffe.NameResolutionError, griffe.AliasResolutionError, AttributeError):
            pass
        # a method named from its class's docstring, or a sibling named bare
        for ancestor in (scope, scope.parent, scope.module):
            if ancestor is not None:
                candidates.append(f"{ancestor.path}.{name}")
    for path in candidates:
        found = _lookup(package, path)
        if found is not None:
            try:
                return found.final_target if found.is_alias else found
            except (griffe.AliasResolutionError, griffe.CyclicAliasError):
                return found
    return None


def _public(path):
    return not any(part.startswith("_") and not part.startswith("__") for part in path.split("."))


class SphinxRoles(griffe.Extension):
    """Rewrite Sphinx roles in every lpviz docstring into autorefs cross-references."""

    def on_package(self, *, pkg, **kwargs):
        if pkg.name != PACKAGE:
            return
        self._rewrite(pkg, pkg, seen=set())

    def _rewrite(self, package, obj, seen):
        if obj.path in seen:
            return
        seen.add(obj.path)
        if obj.docstring is not None:
            obj.docstring.value = ROLE.sub(lambda match: self._link(package, obj, match), obj.docstring.value)
        for member in obj.members.values():
            if not member.is_alias:
                self._rewrite(package, member, seen)

    def _link(self, package, obj, match):
        target = match["target"].strip()
        shown = target
        if target.startswith("~"):
            target = target[1:]
            shown = target.rsplit(".", 1)[-1]
        if match["role"] in ("func", "meth"):
            shown += "()"
        found = _resolve(package, obj, target)
        if found is None:
            if target.startswith(PACKAGE + "."):
                logger.warning("%s: docstring names %s, which does not exist", obj.path, target)
            return f"`{shown}`"
        # the reference shows public objects with a docstring: link only to those
        if not _public(found.path) or not found.docstring:
            return f"`{shown}`"
        return f"[`{shown}`][{found.path}]"
