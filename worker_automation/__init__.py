"""worker-automation: the control plane for automation workers (jobs, queues, live state).

The package is laid out by layer, each folder importing only the ones below it:
``domain`` and ``infra`` (shared words and plumbing), ``models``, ``broker``, ``catalog`` and
``worker``; ``resolvers`` (the operations); ``process`` (what ``serve`` runs besides requests);
the transports ``schema``, ``rest_compat``, ``mcp`` and ``console``; ``asgi`` (the application
and its server); ``cli`` on top. ``overrides`` holds the few places that rely on a library's
undocumented behaviour, each guarded by a contract test.
"""

from __future__ import annotations

DISTRIBUTION = "worker-automation"


def package_version() -> str:
    """The installed distribution's version, as ``--version`` prints it and MCP clients see it:
    read from the installed metadata, so it is the version that was really installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def __getattr__(name: str) -> str:
    if name == "__version__":
        return package_version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
