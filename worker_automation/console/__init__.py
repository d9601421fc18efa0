"""The operator console: static files served by ``serve`` at ``/console/``, talking to ``/graphql``."""
