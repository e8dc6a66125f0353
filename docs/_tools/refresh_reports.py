"""Refresh the reproduce reports in the docs from a run of ``lpviz reproduce``.

    .venv/bin/python docs/_tools/refresh_reports.py                 # runs `lpviz reproduce all --preset quick`
    .venv/bin/python docs/_tools/refresh_reports.py --from DIR      # reports already written to DIR/NAME/

Each experiment's ``report.md`` is copied as written by lpviz (numbers,
verdicts, settings, seeds, versions) to ``docs/reproduce/NAME.md``, followed by
its PNG figures (copied to ``docs/reproduce/NAME/``). Nothing in a report is
written by hand; run this again to replace them all.
"""

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1]
TARGET = DOCS / "reproduce"


def run_reproduce(preset, output):
    command = [sys.executable, "-m", "lpviz", "reproduce", "all", "--preset", preset, "--output", str(output)]
    print("running:", " ".join(command[1:]), flush=True)
    subprocess.run(command, check=True)


def copy_report(folder):
    name = folder.name
    report = (folder / "report.md").read_text(encoding="utf-8").rstrip()
    figures_dir = TARGET / name
    if figures_dir.exists():
        shutil.rmtree(figures_dir)
    figures = sorted(folder.glob("*.png"))
    lines = [report, ""]
    if figures:
        figures_dir.mkdir(parents=True)
        lines += ["## Figures", ""]
        for figure in figures:
            shutil.copy2(figure, figures_dir / figure.name)
            lines += [f"![{figure.stem}]({name}/{figure.name})", ""]
    (TARGET / f"{name}.md").write_text("\n".join(lines), encoding="utf-8")
    print(f"wrote {TARGET / name}.md ({len(figures)} figures)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="quick", help="the preset to run (default quick)")
    parser.add_argument("--from", dest="source", type=Path, help="use the reports already written under DIR")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        source = args.source
        if source is None:
            source = Path(scratch) / "reproduce"
            source.mkdir()
            run_reproduce(args.preset, source)
        folders = sorted(p.parent for p in source.glob("*/report.md"))
        if not folders:
            parser.error(f"no */report.md under {source}")
        for folder in folders:
            copy_report(folder)


if __name__ == "__main__":
    main()
