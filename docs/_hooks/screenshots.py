"""MkDocs hook: ``<!-- screenshots -->`` in a page becomes every picture in
docs/screenshots/, so a screenshot a test or a person adds there is shown
without editing the page. A picture's caption is its file name in words."""

from pathlib import Path

MARKER = "<!-- screenshots -->"


def on_page_markdown(markdown, page, config, **kwargs):
    if MARKER not in markdown:
        return markdown
    folder = Path(config["docs_dir"]) / "screenshots"
    depth = "../" * page.file.src_uri.count("/")
    blocks = []
    for picture in sorted(folder.glob("*.png")):
        caption = picture.stem.replace("_", " ").capitalize()
        blocks.append(f"## {caption}\n\n![{caption}]({depth}screenshots/{picture.name})\n")
    if not blocks:
        raise ValueError(f"no screenshots in {folder}")
    return markdown.replace(MARKER, "\n".join(blocks))
