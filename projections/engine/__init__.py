"""The engine that keeps read models equal to the log: catch-up, rebuilds, views, read-only
connections."""
