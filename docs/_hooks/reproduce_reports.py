"""MkDocs hook: ``<!-- reproduce-reports -->`` becomes a table of every experiment in
lpviz's reproduce registry, linking the report copied to docs/reproduce/NAME.md by
docs/_tools/refresh_reports.py, or saying that none is on the site yet."""

from pathlib import Path

MARKER = "<!-- reproduce-reports -->"


def on_page_markdown(markdown, page, config, **kwargs):
    if MARKER not in markdown:
        return markdown
    from lpviz.reproduce import EXPERIMENTS

    reports = Path(config["docs_dir"]) / "reproduce"
    rows = ["| name | experiment | latest report |", "|---|---|---|"]
    for name, experiment in EXPERIMENTS.items():
        if (reports / f"{name}.md").is_file():
            report = f"[{name}]({name}.md)"
        else:
            report = f"none on this site yet: `lpviz reproduce {name} --preset quick`"
        rows.append(f"| `{name}` | {experiment.title} | {report} |")
    return markdown.replace(MARKER, "\n".join(rows))
