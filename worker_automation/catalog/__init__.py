"""The automation catalogue: every automation the platform runs (its queue, its form, its limits).

Domain data read by every layer (the API validates contexts against the forms, the broker routes
tasks by queue, workers register one task per automation), so it imports nothing but the errors.
"""
