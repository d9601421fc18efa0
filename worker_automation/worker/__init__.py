"""The worker side: automation registry, context forms, progress reporting and implementations."""
