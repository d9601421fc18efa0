"""The broker layer: the Celery app and its routes, Redis queue inspection and purge, worker
inspection, the event bus, and the embedded Redis used when no broker is configured."""
