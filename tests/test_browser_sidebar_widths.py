"""Issue 37, served in Debian's chromium: every field of the sidebar is whole at the window widths people
use (a walk of the served page found the epsilon field cut at 1500 px).

One page, made wider and narrower: at each width the sidebar's fields (the one-alpha settings with the
epsilon slider and its typed field, and the opened "Fit settings") are measured in the page. A field is
whole when its box lies inside the sidebar's box and the window, no ancestor between it and the sidebar
clips it (overflow other than visible), and its label's text is not cut (scrollWidth <= clientWidth).
"""

import json

import pytest

from tests.test_browser_trust import toggle_sidebar

pytestmark = pytest.mark.browser

WIDTHS = (1280, 1366, 1500, 1600, 1920)
PHONE = 412  # the sidebar folds below 800 px and opens over the tabs with the header's toggle

# Every input, select, slider and label in the sidebar (across shadow roots) that is shown, with what cuts it
# (null when whole).
SIDEBAR_FIELDS = """() => {
  const parentOf = (el) => el.assignedSlot || el.parentElement
    || (el.parentNode instanceof ShadowRoot ? el.parentNode.host : null);
  const sidebar = document.getElementById("sidebar");
  const all = [];
  const walk = (root) => {
    for (const el of root.querySelectorAll("*")) { all.push(el); if (el.shadowRoot) walk(el.shadowRoot); }
  };
  walk(sidebar);
  const name = (el) => {
    const cls = typeof el.className === "string" ? el.className.trim() : "";
    return el.tagName.toLowerCase() + (cls ? "." + cls.split(/\\s+/).join(".") : "");
  };
  const side = sidebar.getBoundingClientRect();
  const cut = (el) => {
    const box = el.getBoundingClientRect();
    if (box.left < side.left - 1 || box.right > side.right + 1)
      return `outside the sidebar (${Math.round(box.left)}-${Math.round(box.right)} px`
        + ` in ${Math.round(side.left)}-${Math.round(side.right)})`;
    if (box.left < -1 || box.right > window.innerWidth + 1) return `outside the window (${window.innerWidth} px)`;
    for (let node = parentOf(el); node && node !== sidebar; node = parentOf(node)) {
      const style = getComputedStyle(node);  // a box of display "contents" has none of its own
      if (style.overflowX === "visible" || style.display === "contents") continue;
      const r = node.getBoundingClientRect();
      if (box.left < r.left - 1 || box.right > r.right + 1)
        return `cut by ${name(node)} (${Math.round(r.left)}-${Math.round(r.right)} px)`;
    }
    if (el.tagName === "LABEL" && el.scrollWidth > el.clientWidth + 1)
      return `label text cut (${el.scrollWidth} px in ${el.clientWidth})`;
    return null;
  };
  return all
    .filter(el => el.matches("input, select, textarea, label, .noUi-target, .bk-input-group")
      && el.checkVisibility({visibilityProperty: true}) && el.getBoundingClientRect().width > 0)
    .map(el => ({element: name(el), text: (el.innerText || el.value || "").trim().slice(0, 40),
                 cut: cut(el)}));
}"""


def measure(page):
    page.page.wait_for_timeout(1500)  # laid out at the new width
    fields = page.evaluate(SIDEBAR_FIELDS)
    return fields, [field for field in fields if field["cut"]]


def test_every_sidebar_field_is_whole_at_common_window_widths(page):
    page.one_alpha()  # the epsilon slider and its typed field shown
    page.page.get_by_text("Fit settings").first.click()
    page.page.get_by_label("N iter", exact=True).wait_for()
    problems = {}
    for width in WIDTHS:
        page.page.set_viewport_size({"width": width, "height": 1000})
        fields, cut = measure(page)
        assert any("epsilon (type 0.01 to 100)" in field["text"] for field in fields), width
        assert sum(field["element"].startswith("input") for field in fields) >= 10, width
        if cut:
            problems[width] = cut
    page.page.set_viewport_size({"width": PHONE, "height": 915})
    page.page.wait_for_timeout(1000)
    toggle_sidebar(page, shown=True)
    fields, cut = measure(page)
    assert any("epsilon (type 0.01 to 100)" in field["text"] for field in fields), PHONE
    if cut:
        problems[PHONE] = cut
    assert problems == {}, f"sidebar fields cut: {json.dumps(problems, indent=1)}"
    assert page.errors == []
