"""Every message Panel queues for a page is written: a guard against a race in Panel's write queue.

Panel (1.9) writes a document's changes straight to its page's socket. A change made while an
earlier write is in flight is queued (``panel.io.document._WRITE_MSGS``) behind a write block, and a
task of its own writes the queue. The task that wrote the earlier messages lifts the block once
their writes are done, without looking at the queue: when a later message was queued meanwhile, its
task then finds no block and returns, and the message waits for the document's next change. On a
page whose fits are all paused there is none: the last "paused" never reached the page, which read
"pausing" for good (issue 37; ``kill -USR1`` showed the server's three chains paused and "write block
False, 1 messages queued").

:func:`install` wraps Panel's queue task: a queue it leaves behind with no block is written by a new
task. Nothing else of Panel's changes (the order of the messages is Panel's: queued ones in order).

Mends: Panel 1.9.4 / Bokeh 3.9.2 (``panel.io.document._dispatch_msgs`` drops its write block without
looking at ``_WRITE_MSGS``, so a message queued meanwhile waits for the next change; no upstream issue
known). It may go once Panel writes such a message itself:
tests/test_mends_upstream.py::test_panels_write_queue_still_strands_a_late_message then fails.
"""

from panel.io import document as _panel_document

__all__ = ["install"]

_PANEL_NAMES = ("_dispatch_msgs", "_dispatch_write_task", "_WRITE_BLOCK", "_WRITE_MSGS")


def install():
    """Wrap Panel's write-queue task (once per process; idempotent). A Panel without this queue (its
    names gone) is left alone: the guard is for the code it mends (tests/test_app_writes says which)."""
    if not all(hasattr(_panel_document, name) for name in _PANEL_NAMES):
        return
    original = _panel_document._dispatch_msgs
    if getattr(original, "_lpviz_writes_every_queue", False):
        return

    async def dispatch_msgs(doc):
        await original(doc)  # (its reschedules look the task up by name: they come back here)
        if doc not in _panel_document._WRITE_BLOCK and _panel_document._WRITE_MSGS.get(doc):
            # queued while this task's writes were in flight, and their own task found no block
            _panel_document._WRITE_BLOCK[doc] = True
            _panel_document._dispatch_write_task(doc, dispatch_msgs, doc)

    dispatch_msgs._lpviz_writes_every_queue = True
    dispatch_msgs.__wrapped__ = original  # Panel's own (tests/test_mends_upstream.py runs it unguarded)
    _panel_document._dispatch_msgs = dispatch_msgs
