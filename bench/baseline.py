"""Build the "before" copy of the package: the working tree minus ``bench/package_changes.patch``.

``scale`` and ``pipeline`` take ``--baseline DIR`` and run that copy side by side with the
working tree, so every performance change is measured against the code without it, in one run.

    python -m bench.baseline --out /tmp/wa_base
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
from pathlib import Path

from bench.common import ROOT

PATCH = Path(__file__).with_name("package_changes.patch")


def build(out: Path) -> Path:
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    shutil.copytree(ROOT / "worker_automation", out / "worker_automation")
    with PATCH.open("rb") as patch:
        # -E: files the changes added are removed again, not left empty.
        subprocess.run(["patch", "-R", "-E", "-p1", "--quiet"], stdin=patch, cwd=out, check=True)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", default="/tmp/wa_base", help="directory to (re)create")
    args = parser.parse_args(argv)
    print(build(Path(args.out)))


if __name__ == "__main__":
    main()
