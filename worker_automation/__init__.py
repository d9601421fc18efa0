"""worker-automation: the control plane for automation workers (jobs, queues, live state)."""

__version__ = "0.1.0"
