"""The served dashboard sends its pages without Bokeh's check of every document (issue 56 item 4).

The check cost 0.02 s of a page open's 0.3 s of the server's CPU, paid by every page of a class
opening together, and all it found were the empty columns of the tabs not shown yet (by design). A
value of BOKEH_VALIDATE_DOC given where the server starts is kept.
"""

import os

import pytest


@pytest.mark.parametrize(("given", "kept"), [(None, "false"), ("true", "true")])
def test_the_server_turns_bokehs_document_check_off_unless_told(monkeypatch, given, kept):
    import faulthandler
    import signal

    import panel.command
    from bokeh.settings import settings

    import lpviz.dashboard.serve as serve

    environ = {name: value for name, value in os.environ.items() if name != "BOKEH_VALIDATE_DOC"}
    if given is not None:
        environ["BOKEH_VALIDATE_DOC"] = given
    monkeypatch.setattr(os, "environ", environ)  # what the server sets stays in this test
    monkeypatch.setattr(signal, "signal", lambda *args: None)
    monkeypatch.setattr(faulthandler, "register", lambda *args, **kwargs: None)
    monkeypatch.setattr(serve, "warm_up", lambda: None)
    started = []
    monkeypatch.setattr(panel.command, "main", lambda: started.append(settings.perform_document_validation()))
    serve.serve(serve.parse_args(["--procs", "1", "--port", "5999"]))
    assert environ["BOKEH_VALIDATE_DOC"] == kept
    assert started == [kept == "true"]  # what Bokeh reads when it renders a page
