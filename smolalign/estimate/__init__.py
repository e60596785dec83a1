"""Memory per device and time per step of a planned run, worked out before any weights load."""
