"""Build the "before" copy of the package: ``worker_automation`` as it was at a commit.

``scale``, ``pipeline``, ``endpoints`` and ``subscriptions`` take ``--baseline DIR`` and run that
copy side by side with the working tree, so every performance change is measured against the
code without it, in one run.

    python -m bench.baseline --commit fd62805 --out /tmp/wa_fd62805
    python -m bench.scale --baseline /tmp/wa_fd62805
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
from pathlib import Path

from bench.common import ROOT


def build(out: Path, commit: str) -> Path:
    """``out``/worker_automation as at ``commit`` (``out`` is made anew), from this git checkout."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    command = ["git", "archive", "--format=tar", commit, "worker_automation"]
    archive = subprocess.run(command, cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", default="/tmp/wa_base", help="directory to (re)create")
    parser.add_argument("--commit", required=True, help="the commit whose package to copy")
    args = parser.parse_args(argv)
    print(build(Path(args.out), args.commit))


if __name__ == "__main__":
    main()
