"""An upload larger than the server's message limit is refused in the page, before it is sent.

BokehJS's file input reads the whole file and sends it, base64-encoded, as one websocket message.
A message over the server's limit (``lpviz serve --max-upload``, Tornado's
``websocket_max_message_size``) makes Tornado close the page's connection: the page said "The
connection to the server was lost ... (its fits were stopped)", its session could not be pulled
again ("buffer ... not found"), and no word said the file was too large (issue 58 item 5).

:data:`UPLOAD_LIMIT_JS` wraps ``FileInputView.load_files`` in the page: a file whose message would
pass the limit is not read; the input sends its name and size instead (in ``mime_type``, marked
:data:`TOO_LARGE`), and the session says in the data card what the limit is and what to do
(:func:`too_large`).

Mends: Panel 1.9.4 / Bokeh 3.9.2 (``FileInputView.load_files`` sends any file whole in one message,
whatever the server's limit; no upstream issue known). It may go once BokehJS checks a file's size
against the limit, or sends files in parts:
tests/test_mends_upstream.py::test_bokehjs_file_input_still_sends_a_file_whole then fails.
"""

import os

import param
from panel.custom import JSComponent

from lpviz.budget import format_bytes

__all__ = ["MAX_UPLOAD_ENV", "TOO_LARGE", "UPLOAD_LIMIT_JS", "UploadLimit", "max_upload", "too_large"]

MAX_UPLOAD_ENV = "LPVIZ_MAX_UPLOAD"  # set by `lpviz serve` from --max-upload
BOKEH_DEFAULT_MAX_MESSAGE = 20 * 2**20  # Bokeh's websocket_max_message_size under a plain `panel serve`
# Tornado's default, which Jupyter's server keeps for a kernel's websocket (a 20 MB upload dropped the
# notebook's connection to its kernel, and the file was lost without a word)
JUPYTER_MAX_MESSAGE = 10 * 2**20
TOO_LARGE = "x-lpviz/too-large;bytes="
# the message around a file's base64: its name, the patch's JSON (a few hundred bytes; generous)
MESSAGE_OVERHEAD = 64 * 1024


def max_upload():
    """The server's largest websocket message in bytes (``$LPVIZ_MAX_UPLOAD``, else Bokeh's default)."""
    try:
        value = int(os.environ.get(MAX_UPLOAD_ENV, ""))
    except ValueError:
        return BOKEH_DEFAULT_MAX_MESSAGE
    return value if value > 0 else BOKEH_DEFAULT_MAX_MESSAGE


def largest_file(limit):
    """The largest file whose message (base64: 4 bytes per 3, and the overhead) fits in ``limit``."""
    return max(0, (limit - MESSAGE_OVERHEAD) // 4 * 3)


def too_large(name, mime_type):
    """The data card's words for a file the page did not send (``mime_type`` marked :data:`TOO_LARGE`:
    its size, the limit, and whether the page is a served one or a notebook's, whose messages go
    through Jupyter's server), or ``None`` when ``mime_type`` is no such mark."""
    if not isinstance(mime_type, str) or not mime_type.startswith(TOO_LARGE):
        return None
    fields = dict(part.partition("=")[::2] for part in mime_type[len("x-lpviz/too-large;") :].split(";"))
    size, limit = fields.get("bytes", ""), fields.get("limit", "")
    shown = format_bytes(int(size)) if size.isdigit() else "too large"
    limit = int(limit) if limit.isdigit() else max_upload()
    in_jupyter = fields.get("in") == "jupyter"
    larger = (
        "JupyterLab with a larger --ServerApp.tornado_settings=\"{'websocket_max_message_size': BYTES}\""
        if in_jupyter
        else "the server with a larger `lpviz serve --max-upload BYTES`"
    )
    where = "this notebook's server" if in_jupyter else "this server"
    return (
        f"{name} was not uploaded: it is {shown}, and {where} takes files up to "
        f"{format_bytes(largest_file(limit))} (its messages up to {format_bytes(limit)}); use a smaller "
        f"file (an .npz from `lpviz privatize` is compressed), or start {larger}"
    )


def upload_limit_js(limit, place="server"):
    """The page's script (run at document_ready) that keeps files over ``limit`` from being sent
    (``place``: "server", or "jupyter" for a notebook's dashboard: the words of the fix)."""
    script = UPLOAD_LIMIT_JS.replace("__LIMIT__", str(int(limit))).replace("__PLACE__", place)
    return script.replace("__OVERHEAD__", str(MESSAGE_OVERHEAD))


UPLOAD_LIMIT_JS = f"""
const {{FileInputView}} = Bokeh.require("models/widgets/file_input");
window.__lpviz_upload = {{limit: __LIMIT__, place: "__PLACE__"}};
if (!FileInputView.prototype.__lpviz_upload_limit) {{
  const load_files = FileInputView.prototype.load_files;
  FileInputView.prototype.load_files = async function (files) {{
    const {{limit, place}} = window.__lpviz_upload;
    const big = Array.from(files).find((file) => Math.ceil(file.size / 3) * 4 + __OVERHEAD__ > limit);
    if (big === undefined) {{
      return load_files.call(this, files);
    }}
    this.input_el.value = "";
    const mark = "{TOO_LARGE}" + big.size + ";limit=" + limit + ";in=" + place;
    // the name last: in a notebook each property reaches the kernel alone, and the session reads
    // a file once its name has come (views.controls_view.receive_upload)
    this.model.setv({{mime_type: mark, value: "", filename: big.name}});
  }};
  FileInputView.prototype.__lpviz_upload_limit = true;
}}
"""


class UploadLimit(JSComponent):
    """A zero-size element that installs :data:`UPLOAD_LIMIT_JS` where no served page's script runs:
    a notebook's dashboard (:meth:`lpviz.dashboard.page.Dashboard.__panel__`), whose messages to its
    kernel pass Jupyter's server (``limit``: :data:`JUPYTER_MAX_MESSAGE`)."""

    limit = param.Integer(default=JUPYTER_MAX_MESSAGE, bounds=(1, None))

    _esm = (
        "export function render({ model }) {\n"
        + upload_limit_js(0, "jupyter").replace("limit: 0,", "limit: model.limit,")
        + "}\n"
    )

    def __init__(self, **params):
        params.setdefault("width", 0)
        params.setdefault("height", 0)
        params.setdefault("margin", 0)
        super().__init__(**params)
