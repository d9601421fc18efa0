"""Build the "before" copy of the package: the working tree minus ``bench/package_changes.patch``,
or the package as it was at a commit (``--commit``, from a git checkout).

``scale``, ``pipeline``, ``endpoints`` and ``subscriptions`` take ``--baseline DIR`` and run that
copy side by side with the working tree, so every performance change is measured against the
code without it, in one run.

    python -m bench.baseline --out /tmp/wa_base
    python -m bench.baseline --commit e6bc7a1 --out /tmp/wa_e6bc7a1
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
from pathlib import Path

from bench.common import ROOT

PATCH = Path(__file__).with_name("package_changes.patch")


def build(out: Path, commit: str | None = None) -> Path:
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    if commit is not None:
        command = ["git", "archive", "--format=tar", commit, "worker_automation"]
        archive = subprocess.run(command, cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
        return out
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
    parser.add_argument("--commit", help="take the package as it was at this commit instead")
    args = parser.parse_args(argv)
    print(build(Path(args.out), args.commit))


if __name__ == "__main__":
    main()
