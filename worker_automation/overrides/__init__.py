"""Where this package subclasses or rebuilds a library's undocumented machinery, each for what it
measurably buys (its module says what, with the figure). Every module here has a contract test in
``tests/contract/`` that fails when a release of the library changes what the module relies on.
Nothing here imports the rest of the package."""
