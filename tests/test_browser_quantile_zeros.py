"""Issue 57 MEDIUM 9, served in Debian's chromium: in the quantile colour mode (the Enron presets' and
an upload's) the zero true counts, most cells of sparse counts, were drawn salmon, a colour a third up
the palette, so the truth looked like a flat sheet; its colour bar was titled "rate" under "true counts".

The quantile mode is Bokeh's EqHistColorMapper; with ``rescale_discrete_levels`` (HoloViews' default,
copied by the page) data of few distinct values, as small counts are, start part-way up the palette.
What the page draws is read from the mapper itself: the palette index it gives a zero, after it has
scanned the drawn image. Sparse counts of one's own (an upload, whose truth is the counts, not rates)
stand for Enron's, which this machine does not have.
"""

import pytest

pytestmark = pytest.mark.browser

# Each shown figure's title, its colour bars' titles and, for an image's colour mapper, the palette
# index (of its palette's length) the mapper gives 0 and the image's largest value, after scanning it.
RATE_FIGURES = """() => {
  const out = [];
  for (const doc of window.Bokeh.documents) for (const model of doc.all_models) {
    if (model.type !== "Figure" && model.constructor.name !== "Figure") continue;
    const view = window.Bokeh.index.find_one(model);
    if (!view || !view.el || !view.el.isConnected) continue;
    const bars = model.right.filter(r => r.type === "ColorBar").map(r => r.title);
    const images = [];
    for (const r of model.renderers) {
      const glyph = r.glyph;
      if (!glyph || glyph.type !== "Image") continue;
      const mapper = glyph.color_mapper;
      const data = r.data_source.data instanceof Map ? r.data_source.data.get("image") : r.data_source.data.image;
      if (!data || !data.length || mapper._scan_data == null) continue;
      const image = data[0];
      let top = -Infinity;
      for (const value of image) if (value > top) top = value;
      const n = mapper.palette.length;
      images.push({mapper: mapper.type, n, zero: mapper.value_to_index(0, n),
                   top: mapper.value_to_index(top, n), zeros: image.filter(v => v === 0).length,
                   cells: image.length});
    }
    out.push({title: model.title ? model.title.text : "", bars, images});
  }
  return out;
}"""


def sparse_csv(path, rows=20, columns=12):
    """Counts mostly zero, the rest a handful of small values (as an e-mail network's are)."""
    lines = []
    for i in range(rows):
        lines.append(",".join(str((i + j) % 6) if (i * columns + j) % 7 == 0 else "0" for j in range(columns)))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_quantile_colours_draw_zero_true_counts_at_the_bottom_under_a_count_bar(page, tmp_path):
    page.choose("upload")
    page.page.get_by_text("no file uploaded yet").first.wait_for()
    page.page.locator("input[type=file]").set_input_files(str(sparse_csv(tmp_path / "sparse.csv")))
    page.page.get_by_text("sparse.csv: 20 x 12").first.wait_for(timeout=60_000)
    page.tab("Fits")
    page.wait_until(
        f"() => ({RATE_FIGURES})().some(f => f.title === 'truth (true counts)' && f.images.length === 1)",
    )
    truth = next(f for f in page.evaluate(RATE_FIGURES) if f["title"] == "truth (true counts)")
    (image,) = truth["images"]
    assert image["mapper"] == "EqHistColorMapper", truth  # the quantile mode is in force
    assert image["zeros"] > image["cells"] / 2, truth  # most cells are zero
    assert image["zero"] == 0, truth  # zero: the palette's bottom colour (it was a third up: salmon)
    assert image["top"] == image["n"] - 1, truth  # the largest count: its top colour
    assert truth["bars"] == ["count"], truth  # counts, not rates
    page.page.wait_for_timeout(500)
    assert page.errors == [], page.errors
