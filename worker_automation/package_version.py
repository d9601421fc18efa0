"""The installed package's version, as ``--version`` prints it and MCP clients see it: read from
the installed distribution's metadata, so it is the version that was really installed."""

from __future__ import annotations

DISTRIBUTION = "worker-automation"


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"
