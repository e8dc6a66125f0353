"""The whole dashboard as one Panel object: :class:`Dashboard`, served or in a notebook cell.

A :class:`Dashboard` owns one session (its :class:`~lpviz.dashboard.session.settings.Settings`,
:class:`~lpviz.dashboard.session.datastore.DataStore` and
:class:`~lpviz.dashboard.session.fits.Fits`), the sidebar (teaching steps, controls) and one view per
tab. Served (``Dashboard().servable()`` under ``panel serve``, ``lpviz serve``), it is the page's Bootstrap
template; shown in a cell or a layout, the same parts in a column (a template needs a page of its own).
"""

import panel as pn
import param

from lpviz.dashboard.served import NARROW_PX
from lpviz.dashboard.serving.onscreen import ViewTabs
from lpviz.dashboard.serving.paint import SPINNER_CSS, BusySpinner, busy_spinner
from lpviz.dashboard.serving.throttle import PageLag
from lpviz.dashboard.serving.uploads import UploadLimit
from lpviz.dashboard.session.default import default_session
from lpviz.dashboard.session.fits import Fits
from lpviz.dashboard.views.bessel_view import BesselView
from lpviz.dashboard.views.blocks_view import BlocksView
from lpviz.dashboard.views.central_view import CentralView
from lpviz.dashboard.views.controls_view import ControlsView
from lpviz.dashboard.views.export import ExportView
from lpviz.dashboard.views.fits_view import FitsView
from lpviz.dashboard.views.noise_view import NoiseView
from lpviz.dashboard.views.privacy_view import PrivacyView
from lpviz.dashboard.views.sweep_view import SweepView
from lpviz.dashboard.views.teaching import Teaching
from lpviz.dashboard.views.tensor_view import TensorView
from lpviz.dashboard.views.topicmap_view import TopicMapView
from lpviz.dashboard.views.topics_view import TopicsView

TITLE = "lpviz: locally private Bayesian inference for count data"
SIDEBAR_WIDTH = 340

NARROW_CSS = f"""
@media (max-width: {NARROW_PX}px) {{
  #content {{ position: relative; }}
  #sidebar.show, #sidebar.collapsing {{
    position: absolute; top: 0; left: 0; bottom: 0; z-index: 1050;
    width: min(var(--sidebar-width), 92vw); max-width: 92vw !important;
    background-color: var(--bs-body-bg); box-shadow: 4px 0 12px rgba(0, 0, 0, 0.25);
  }}
  #main {{ padding: 6px 4px 12px 4px; }}
  #header .title {{ font-size: 1.05em; overflow: hidden; text-overflow: ellipsis; }}
}}
"""
# The tab headers wrap onto further lines at phone width: in one scrolling row (Bokeh's) a 412 px phone
# showed 5 of the 11 with nothing saying the rest were there (issue 37). In the tabs' own shadow root.
NARROW_TABS_CSS = f"""
@media (max-width: {NARROW_PX}px) {{
  :host(.bk-above) .bk-headers-wrapper {{ flex-wrap: wrap; overflow-x: visible; }}
  :host(.bk-above) .bk-tab {{ padding: 4px 8px; }}
}}
"""


def exported_views(fits):
    """The views of the tabs whose figures the Export tab offers, by tab name, in the page's order
    (tests/test_app_export_every.py compares every export of theirs with its tab)."""
    data = fits.data
    return {
        "Data & noise": NoiseView(data=data),
        "Fits": FitsView(fits=fits),
        "Topics": TopicsView(fits=fits),
        "Topic map": TopicMapView(fits=fits),
        "Blocks": BlocksView(fits=fits),
        "Tensor": TensorView(fits=fits),
        "Bessel": BesselView(fits=fits),
        "Privacy": PrivacyView(data=data),
        "Central vs local": CentralView(fits=fits),
    }


def _served():
    """Whether this runs in a session of a Bokeh server (``panel serve``, ``lpviz serve``): the current
    document has a session. (``pn.state.served`` asks whether its caller's module is a page script,
    so from this module it always said no: a ``Dashboard().servable()`` script got the notebook's
    column, without the served page's configuration, issue 55.)"""
    doc = pn.state.curdoc
    return doc is not None and doc.session_context is not None


def _check_release(release):
    """A TypeError for ``release=`` of a type the data store cannot show, before anything is built."""
    from lpviz.datasets import CountData
    from lpviz.release import Release

    if release is not None and not isinstance(release, Release | CountData):
        raise TypeError(
            f"release= of type {type(release).__name__} cannot be shown: give a lpviz.Release (noised counts "
            "with their epsilon and N, as `lpviz privatize` writes) or lpviz.datasets.CountData "
            "(true counts, e.g. from lpviz.datasets.load_counts)"
        )


def _load_in_notebook():
    """In a Jupyter kernel whose Panel extension is not loaded yet: load it as lpviz's views need it
    (:func:`lpviz.dashboard.in_jupyter.extension`: resources inline), so that a cell of
    ``Dashboard()`` alone shows the dashboard. Without Panel's notifications: in JupyterLab their
    script (Notyf) was never loaded and the page raised "Notyf is not defined" (issue 55); nothing of
    a notebook's dashboard notifies (a refused value raises in the kernel, the served page's
    notifications are :func:`lpviz.dashboard.served.configure`'s)."""
    from lpviz.dashboard.in_jupyter import _running_kernel, extension

    if _running_kernel() is not None and not pn.extension._loaded:
        extension()


class Dashboard(pn.viewable.Viewer):
    """The lpviz dashboard: every tab, the controls and the teaching steps of one session.

    In a Jupyter cell (any environment where lpviz is installed)::

        from lpviz.dashboard import Dashboard
        Dashboard(preset="Figure 5 (Enron network)", chains=2)

    Under ``panel serve`` (a script of two lines)::

        from lpviz.dashboard import Dashboard
        Dashboard().servable()

    Parameters
    ----------
    source : str, optional
        The data set, by the name the sidebar's Data menu uses (e.g. ``"synthetic-topics"``,
        ``"synthetic-blocks"``, ``"enron-network"``; :data:`~lpviz.dashboard.session.settings.SOURCES`).
    release : lpviz.Release or lpviz.datasets.CountData, optional
        Data of your own, shown as an upload is: a release is fitted as it is (its own noise level,
        no truth beside it); true counts are noised by the settings.
    preset : str, optional
        A preset to load first (:data:`~lpviz.dashboard.session.presets.PRESETS`; default the
        dashboard's own, Figure 3 at large alpha0). Settings given here win over the preset's.
    teaching : bool
        Open in teaching mode: the steps in the sidebar, the tabs following them.
    **settings
        Any further parameter of :class:`~lpviz.dashboard.session.settings.Settings` (``epsilon``,
        ``N``, ``n_iter``, ``chains``, ``holdout``, ...).

    Attributes
    ----------
    fits : Fits
        The session's chains; ``fits.data`` its data store, ``fits.settings`` its settings.
    """

    fits = param.ClassSelector(class_=Fits, constant=True, doc="the session's chains (its data as .data)")

    def __init__(self, *, source=None, release=None, preset=None, teaching=False, **settings):
        from lpviz.dashboard.session.settings import Settings

        unknown = sorted(set(settings) - set(Settings.param))
        if unknown:
            raise TypeError(
                f"Dashboard() got unknown settings {unknown}: give a data set as source= or release=, a "
                "preset=, teaching=, or parameters of the sidebar's Settings (epsilon, N, n_iter, chains, ...)"
            )
        if not isinstance(teaching, bool):
            raise TypeError(f"teaching must be True or False, not {teaching!r}")
        _check_release(release)  # every argument checked before the session is built (seconds of work)
        settings.update({k: v for k, v in (("source", source), ("preset", preset)) if v is not None})
        if not _served():
            _load_in_notebook()
        super().__init__(fits=default_session(**settings))
        if release is not None:
            self.fits.data.use_data(release)
        self._teaching_on = teaching
        self._parts = None

    @property
    def parts(self):
        """The page's parts, built once: header items, sidebar items and the tabs."""
        if self._parts is None:
            fits = self.fits
            views = exported_views(fits)
            export = ExportView(fits=fits, views=list(views.values()), shown=False)
            views["Epsilon sweep"] = SweepView(fits=fits)  # its own CSV/PNG downloads; not among the exported figures
            views["Export"] = export
            # each tab built when first shown; a hidden tab's views wait (serving/onscreen.py)
            tabs = ViewTabs(*views.items(), sizing_mode="stretch_width", stylesheets=[NARROW_TABS_CSS])
            # Spins while a chain runs or data are being built, nothing else (Panel's own
            # indicator also spins for every periodic callback).
            # (serving.paint.busy_spinner: a text that spins, so a Pause's answer lays nothing out)
            spinner = BusySpinner(
                pn.bind(busy_spinner, fits.param.busy), width=24, height=24, margin=(8, 10), stylesheets=[SPINNER_CSS]
            )
            teaching = Teaching(fits=fits, tabs=tabs, on=self._teaching_on)
            # the page reports its lag (the session's updates slow down for it): a root of its own, drawn with
            # the page. Inside the Fits tab, BokehJS held the whole tab's views unrendered while it loaded
            # the reporter's module; a patch meanwhile (a preset's iterations: a progress bar's max) hit a
            # bar not drawn yet and the rest of that patch (the progress lines) was lost
            self._parts = {
                "header": [spinner, PageLag(fits.pace)],
                "sidebar": [teaching, ControlsView(data=fits.data)],
                "main": [tabs],
            }
        return self._parts

    def template(self):
        """The served page: a Bootstrap template (Fast's always fetches a Google font, which fails
        with console errors on machines without internet access)."""
        parts = self.parts
        template = pn.template.BootstrapTemplate(
            title=TITLE,
            busy_indicator=None,
            header=parts["header"],
            sidebar=parts["sidebar"],
            main=parts["main"],
            sidebar_width=SIDEBAR_WIDTH,
            header_background="#b2182b",
            # without it a phone's browser lays the page out at 980 px and shrinks it (issue 57 MEDIUM 15)
            meta_viewport="width=device-width, initial-scale=1",
        )
        template.config.raw_css.append(NARROW_CSS)
        return template

    def __panel__(self):
        # the parts in a column, served or not (a template cannot sit in a layout): servable() serves the template
        parts = self.parts
        # UploadLimit: a notebook has no served page's scripts (served.page_template), and its kernel's
        # messages pass Jupyter's server, whose limit a larger file broke the connection at (issue 58)
        header = pn.Row(
            pn.pane.HTML(f"<b>{TITLE}</b>", sizing_mode="stretch_width"),
            *parts["header"],
            UploadLimit(),
            sizing_mode="stretch_width",
        )
        sidebar = pn.Column(*parts["sidebar"], width=SIDEBAR_WIDTH)
        body = pn.Row(sidebar, *parts["main"], sizing_mode="stretch_width")
        return pn.Column(header, body, sizing_mode="stretch_width")

    def servable(self, title=None, location=True, area="main", target=None):
        """Serve this dashboard as the page of a ``panel serve`` session, as ``lpviz serve`` does."""
        if not _served():
            return super().servable(title=title, location=location, area=area, target=target)
        from lpviz.dashboard.served import configure, serve_dashboard

        configure()  # this session's Panel configuration, as a page script's import gives it
        serve_dashboard(self)
        return self
