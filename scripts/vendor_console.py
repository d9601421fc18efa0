"""Fetch the console's JavaScript libraries from the npm registry, pinned, with their licences.

Run from the repository root (needs ``npm`` on PATH; nothing else from Node is used):

    python scripts/vendor_console.py

Each package is fetched with ``npm pack NAME@VERSION`` (the exact tarball the registry serves,
its integrity checked by npm), and only the ES module files the console imports are copied, with
the package's licence beside them. The result is committed: installing or running the service
needs neither npm nor a network. axe-core is for the browser tests only and is not shipped.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "worker_automation" / "console" / "static" / "vendor"
TEST_ONLY = ROOT / "tests" / "integration" / "vendor"


@dataclass(frozen=True)
class Package:
    """One npm package: the files to copy (glob patterns inside the tarball's ``package/``)."""

    name: str
    version: str
    files: tuple[str, ...]
    licence: str
    target: Path


PACKAGES = (
    Package("preact", "11.2.0", ("dist/preact.mjs", "hooks/dist/hooks.mjs"), "LICENSE", SHIPPED),
    Package("htm", "3.1.1", ("dist/htm.mjs",), "LICENSE", SHIPPED),
    # client.js imports a shared chunk whose name carries a content hash: copy it whatever it is.
    Package("graphql-ws", "6.4.2", ("dist/client.js", "dist/common-*.js"), "LICENSE.md", SHIPPED),
    Package("uplot", "1.6.32", ("dist/uPlot.esm.js", "dist/uPlot.min.css"), "LICENSE", SHIPPED),
    Package("axe-core", "4.14.1", ("axe.min.js",), "LICENSE", TEST_ONLY),
)


def pack(package: Package, workdir: Path) -> Path:
    """``npm pack`` one exact version into ``workdir``; returns the unpacked ``package/`` folder."""
    spec = f"{package.name}@{package.version}"
    done = subprocess.run(
        ["npm", "pack", spec, "--json", "--pack-destination", str(workdir)],
        capture_output=True,
        text=True,
        check=True,
    )
    filename = json.loads(done.stdout)[0]["filename"]
    unpacked = workdir / package.name
    with tarfile.open(workdir / filename) as archive:
        archive.extractall(unpacked, filter="data")
    return unpacked / "package"


def vendor(package: Package, workdir: Path) -> list[str]:
    """Copy one package's files and licence; returns the copied paths (relative to its folder)."""
    source = pack(package, workdir)
    target = package.target / package.name
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    copied: list[str] = []
    for pattern in package.files:
        matches = sorted(source.glob(pattern))
        if not matches:
            raise SystemExit(f"{package.name}@{package.version}: nothing matches {pattern}")
        for path in matches:
            shutil.copyfile(path, target / path.name)
            copied.append(path.name)
    shutil.copyfile(source / package.licence, target / "LICENSE")
    (target / "VERSION").write_text(f"{package.name}@{package.version}\n")
    return copied


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        for package in PACKAGES:
            files = vendor(package, Path(tmp))
            where = package.target.relative_to(ROOT) / package.name
            print(f"{package.name}@{package.version} -> {where}: {', '.join(files)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
