"""REST transports: the documented /api/v1/worker-automation routes and the worker protocol."""
