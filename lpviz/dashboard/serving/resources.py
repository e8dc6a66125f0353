"""Patches of Panel's and Bokeh's rendering: what a page gets stays the same, what it costs does not.

- :func:`serve_stylesheets_locally`: Panel's style sheets from this server, never from its CDN (the
  served dashboard works offline). Panel 1.9 points a component's style sheets at its CDN and moves
  them to the server's copy when it renders the component into a page (the document's
  ``dist_url``). A pane updated before its new model is in a document (a Markdown or DataFrame
  pane redrawn by a view, ``model.document`` still None) renders with no document, so its style
  sheets stay on the CDN and the browser fetches them from there: failed requests offline, a third
  party contacted online. Served pages only (``lpviz/dashboard/app.py``): a notebook renders inline.
- :func:`reuse_design_modifiers` and :func:`serialize_patches_lazily`: the event loop a class
  shares spent a fifth of its time in lookups Panel and Bokeh repeat for every update and every
  message (served pages and notebooks: ``lpviz/dashboard/app.py``, :func:`lpviz.dashboard.in_jupyter.extension`).
"""

import functools
import importlib
import types

from bokeh.core.property.wrappers import (
    PropertyValueColumnData,
    PropertyValueContainer,
    PropertyValueDict,
    PropertyValueList,
    PropertyValueSet,
)
from bokeh.core.serialization import Serializer
from bokeh.model import Model
from bokeh.models import ImportedStyleSheet
from panel.io.resources import CDN_DIST, LOCAL_DIST, patch_stylesheet, use_cdn
from panel.io.state import state
from panel.reactive import Reactive
from panel.theme.base import Design, Theme
from param import Parameter


def serve_stylesheets_locally():
    """Patch Panel's property rendering so that style sheets rendered without a page's document
    point at the server's static files (``static/extensions/panel/``), like the page's own.

    Mends: Panel 1.9.4 / Bokeh 3.9.2 (``Reactive._get_properties`` with no page document, and
    ``Reactive._update_model`` through ``panel.reactive.patch_stylesheet``, point style sheets at
    Panel's CDN even when the server serves its own resources; no upstream issue known). It may go
    once Panel renders them local: tests/test_mends_upstream.py::test_panel_still_points_style_sheets_at_its_cdn
    then fails."""
    original = Reactive._get_properties
    if getattr(original, "_lpviz_local", False):
        return

    def _get_properties(self, doc):
        properties = original(self, doc)
        if "stylesheets" in properties and (doc is None or "dist_url" not in doc._template_variables):
            local = f"{state.rel_path}/{LOCAL_DIST}" if state.rel_path else LOCAL_DIST
            for sheet in properties["stylesheets"]:
                if isinstance(sheet, ImportedStyleSheet):
                    patch_stylesheet(sheet, local)
        return properties

    _get_properties._lpviz_local = True  # marks the patch as applied
    _get_properties.__wrapped__ = original  # Panel's own (tests/test_mends_upstream.py runs it unpatched)
    Reactive._get_properties = _get_properties  # see the module docstring

    # An update of a model's style sheets outside a page's document (``Reactive._update_model`` with no
    # document, or one without its ``dist_url``) re-pointed them at the CDN: Panel passes its CDN as the
    # place to serve from, and patch_stylesheet then rewrites even a local sheet's URL to the CDN's. A
    # server serving its own resources never serves from the CDN: the local folder instead.
    module = importlib.import_module("panel.reactive")
    original_patch = module.patch_stylesheet

    def patch_locally(stylesheet, dist_url):
        if dist_url == CDN_DIST and not use_cdn():
            dist_url = f"{state.rel_path}/{LOCAL_DIST}" if state.rel_path else LOCAL_DIST
        return original_patch(stylesheet, dist_url)

    patch_locally.__wrapped__ = original_patch
    module.patch_stylesheet = patch_locally


def reuse_design_modifiers():
    """Patch Panel's design lookups, which ran on every property update of every component
    (Panel 1.9: a progress line's text, a trace's status) though the answer never changes within a
    process: the modifiers of a design, component type and theme.

    - ``Reactive._update_properties`` looks the design's modifiers up only when the update changes
      the ``stylesheets``, the only property it uses them for;
    - ``Design._get_modifiers`` (class, not file, lookups: ``isfile`` on the theme's CSS for each
      call) is computed once per design, component type, theme and server/notebook, and handed out
      as a copy (callers replace its ``stylesheets``).

    The event loop of a served class spent about 8% of its time in these lookups.

    Mends: Panel 1.9.4 / Bokeh 3.9.2 (``Reactive._update_properties`` calls ``Design.params`` at every
    update, and ``Design._get_modifiers`` resolves the theme's CSS files at every call; no upstream
    issue known). It may go once Panel skips or caches these lookups itself:
    tests/test_mends_upstream.py::test_panel_still_looks_design_modifiers_up_at_every_update then fails.
    """
    if getattr(Reactive._update_properties, "_lpviz_reused", False):
        return
    update_properties = Reactive._update_properties

    def _update_properties(self, *events, doc):
        if any(event.name == "stylesheets" for event in events):
            return update_properties(self, *events, doc=doc)
        return self._process_param_change({event.name: event.new for event in events})

    get_modifiers = Design._get_modifiers.__func__
    computed = {}

    def _get_modifiers(cls, viewable, theme=None, isolated=True):
        is_server = bool(state.curdoc.session_context) if not state._is_pyodide and state.curdoc else False
        css = _theme_css(theme) if isinstance(theme, Theme) else None
        key = (cls, type(viewable), type(theme) if isinstance(theme, Theme) else theme, css, isolated, is_server)
        if key not in computed:
            computed[key] = get_modifiers(cls, viewable, theme=theme, isolated=isolated)
        modifiers, child_modifiers = computed[key]
        modifiers = dict(modifiers)
        if "stylesheets" in modifiers:
            modifiers["stylesheets"] = list(modifiers["stylesheets"])
        return modifiers, child_modifiers

    _update_properties._lpviz_reused = True  # marks the patch as applied
    _update_properties.__wrapped__, _get_modifiers.__wrapped__ = update_properties, get_modifiers
    Reactive._update_properties = _update_properties
    Design._get_modifiers = classmethod(_get_modifiers)


def _theme_css(theme):
    """The theme's two style sheet settings as set (the files they name, unresolved): the modifiers'
    cache key. Reading ``theme.css`` resolves the path on disk at every call (``param.Filename``: two
    ``isfile`` per lookup), 5% of a page open's server time in this key alone; the value as set names the
    same file, since the search paths do not change within a process."""
    raw = Parameter.__get__
    cls = type(theme)
    return (raw(cls.param["base_css"], theme, cls), raw(cls.param["css"], theme, cls))


class SyncedModelsSerializer(Serializer):
    """Bokeh's serializer for a PATCH-DOC message, looking the page's synced models up when met.

    Bokeh (3.9) builds, for every message to a page, the reference of every model the page already
    has (``{"id": ...}`` for each of a page's thousand models) and then uses the few the patch
    touches: with a class on one server, 12% of the event loop while the chains run. This keeps
    the synced models as the set they are and makes a model's reference when the patch meets it:
    the same message, references and buffers (``tests/test_app_resources.py``).
    """

    def __init__(self, *, references=frozenset(), **options):
        super().__init__(**options)
        self._synced = references

    def _synced_ref(self, obj):
        if isinstance(obj, Model) and obj in self._synced:
            ref = self._references[id(obj)] = obj.ref
            return ref
        return None

    def has_ref(self, obj):
        return super().has_ref(obj) or self._synced_ref(obj) is not None

    def get_ref(self, obj):
        ref = super().get_ref(obj)
        return ref if ref is not None else self._synced_ref(obj)


def serialize_patches_lazily():
    """Make Bokeh's PATCH-DOC messages with :class:`SyncedModelsSerializer` (once per process).

    Mends: Panel 1.9.4 / Bokeh 3.9.2 (``bokeh.core.serialization.Serializer.__init__`` builds
    ``obj.ref`` for every synced model, and ``bokeh.protocol.messages.patch_doc`` makes one per
    message; no upstream issue known). It may go once Bokeh makes the references lazily:
    tests/test_mends_upstream.py::test_bokehs_serializer_still_refs_every_synced_model then fails."""
    module = importlib.import_module("bokeh.protocol.messages.patch_doc")  # the package exports the class
    if module.Serializer is Serializer:
        module.Serializer = SyncedModelsSerializer


# Values a default may be kept as and handed out again: nothing can change them in place.
_IMMUTABLE = (type(None), bool, int, float, complex, str, bytes)
# Bokeh's containers of an empty default: made anew (empty) at each read, as Bokeh does.
_EMPTY_CONTAINERS = (PropertyValueList, PropertyValueDict, PropertyValueSet, PropertyValueColumnData)


def _immutable(value):
    if type(value) is tuple:
        return all(_immutable(item) for item in value)
    return type(value) in _IMMUTABLE


def _empty(value):
    return (type(value) in (list, dict, set) or isinstance(value, PropertyValueContainer)) and len(value) == 0


class _Fresh:
    """A default made anew at each read (an empty list, dict or set of Bokeh's: each model gets its own)."""

    __slots__ = ("make",)

    def __init__(self, make):
        self.make = make


def reuse_bokeh_defaults():
    """Patch Bokeh's default values, which it works out again at every read of a property left at its
    default (Bokeh 3.9: walk the class's MRO for overridden defaults, copy the default, validate it):
    a page open reads ~9,000 of them (making the models, then serialising them), a fifth of its
    server CPU (issue 41).

    - ``HasProps._overridden_defaults`` is computed once per class (set by Bokeh's metaclass when the
      class is made, never changed after; handed out read-only, as ``themed_default`` uses it);
    - ``Property.themed_default`` is kept per property, class and name when the default is an
      immutable value (None, a number, a string, a tuple of them): the same value Bokeh would make, so
      sharing it changes nothing. A themed value, a callable default (a new model, a fresh list) and
      every mutable default are still made at each read, as before.

    Mends: Panel 1.9.4 / Bokeh 3.9.2 (``Property.themed_default`` calls ``HasProps._overridden_defaults``,
    a walk of the MRO into a new dict, at every read; ``PropertyDescriptor.has_unstable_default`` and
    ``HasProps.themed_values`` look up again; ``bokeh.settings`` reads the environment at every call;
    no upstream issue known). It may go once Bokeh keeps them itself:
    tests/test_mends_upstream.py::test_bokeh_still_works_defaults_out_at_every_read then fails.
    """
    from bokeh.core.has_props import HasProps
    from bokeh.core.property.bases import Property
    from bokeh.core.property.descriptors import PropertyDescriptor
    from bokeh.settings import settings as bokeh_settings

    if getattr(Property.themed_default, "_lpviz_reused", False):
        return
    overridden_defaults = HasProps._overridden_defaults.__func__
    themed_default = Property.themed_default
    per_class = {}
    kept = {}  # (id(property), class, name, no_eval) -> (property, value): the property kept alive

    def _overridden_defaults(cls):
        defaults = per_class.get(cls)
        if defaults is None:
            defaults = per_class[cls] = overridden_defaults(cls)
        return defaults

    def _themed_default(self, cls, name, theme_overrides, *, no_eval=False):
        if theme_overrides is not None and name in theme_overrides:
            return themed_default(self, cls, name, theme_overrides, no_eval=no_eval)
        key = (id(self), cls, name, no_eval)
        hit = kept.get(key)
        if hit is not None and hit[0] is self:
            value = hit[1]
            return value.make() if type(value) is _Fresh else value
        value = themed_default(self, cls, name, theme_overrides, no_eval=no_eval)
        overrides = _overridden_defaults(cls)
        raw = overrides[name] if name in overrides else self._default
        if not callable(raw) and _immutable(raw) and _immutable(value):
            kept[key] = (self, value)
        elif _empty(raw) and _empty(value) and type(value) in _EMPTY_CONTAINERS:
            kept[key] = (self, _Fresh(type(value)))
        return value

    has_unstable_default = PropertyDescriptor.has_unstable_default
    unstable = {}  # (id(descriptor), class) -> (descriptor, answer)

    def _has_unstable_default(self, obj):
        key = (id(self), type(obj))
        hit = unstable.get(key)
        if hit is None or hit[0] is not self:
            hit = unstable[key] = (self, has_unstable_default(self, obj))
        return hit[1]

    def _themed_values(self):
        # as set by HasProps.apply_theme, in the instance's dict; Bokeh's getattr missed first
        # (HasProps.__getattr__: a lookup of the class's properties) for every model without a theme
        return getattr(self, "__dict__", {}).get("__themed_values__")

    _themed_default._lpviz_reused = True  # marks the patch as applied
    for patched, original in (
        (_themed_default, themed_default),
        (_overridden_defaults, overridden_defaults),
        (_has_unstable_default, has_unstable_default),
        (_themed_values, HasProps.themed_values),
    ):
        patched.__wrapped__ = original
    HasProps._overridden_defaults = classmethod(_overridden_defaults)
    HasProps.themed_values = _themed_values
    Property.themed_default = _themed_default
    PropertyDescriptor.has_unstable_default = _has_unstable_default
    # Two of Bokeh's settings read at every model made (its id) and serialised, each time from the
    # environment: read once, here, and kept (``set_value``: what a program setting them does).
    for setting in (bokeh_settings.simple_ids, bokeh_settings.serialize_include_defaults):
        setting.set_value(setting())


def _signature_shape(callback):
    """What the signature of ``callback`` depends on, as a hashable key without the callback itself (a
    session's closures are not kept alive by it), or None where that is not known (a callable object,
    a wrapped function, one with a ``__signature__``)."""
    if isinstance(callback, functools.partial):
        inner = _signature_shape(callback.func)
        return None if inner is None else ("partial", inner, len(callback.args), tuple(sorted(callback.keywords)))
    if isinstance(callback, types.MethodType):
        inner = _signature_shape(callback.__func__)
        return None if inner is None else ("method", inner)
    if type(callback) is types.FunctionType and not hasattr(callback, "__wrapped__"):
        if hasattr(callback, "__signature__"):
            return None
        kwdefaults = tuple(sorted(callback.__kwdefaults__ or {}))
        return ("function", callback.__code__, len(callback.__defaults__ or ()), kwdefaults)
    return None


def check_callbacks_once():
    """Patch Bokeh's check of a callback's signature (``on_change``, ``on_event``) to check each shape of
    callback once per process: Bokeh 3.9 runs ``inspect.signature`` at every ``on_change``, and Panel
    registers ~350 of them a page open (the same few bound methods, each in a new ``partial``). The
    shape (the code, the number of defaults, the arguments a partial binds) decides the signature; a
    callback whose shape is not known this way is checked every time, and a failed check raises every
    time, as before.

    Mends: Panel 1.9.4 / Bokeh 3.9.2 (``bokeh.util.callback_manager._check_callback`` runs
    ``inspect.signature`` at every call; no upstream issue known). It may go once Bokeh caches the
    check: tests/test_mends_upstream.py::test_bokeh_still_inspects_every_callbacks_signature then fails."""
    module = importlib.import_module("bokeh.util.callback_manager")
    check = module._check_callback
    if getattr(check, "_lpviz_once", False):
        return
    passed = set()

    def _check_callback(callback, fargs, what="Callback functions"):
        shape = _signature_shape(callback)
        key = None if shape is None else (shape, tuple(fargs))
        if key is not None and key in passed:
            return
        check(callback, fargs, what)
        if key is not None:
            passed.add(key)

    _check_callback._lpviz_once = True  # marks the patch as applied
    _check_callback.__wrapped__ = check
    module._check_callback = _check_callback
