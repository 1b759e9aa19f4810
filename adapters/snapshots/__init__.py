"""Snapshot tars and the Docker engine: `docker save` tars read and verified offline, loaded
into an engine, and whether a snapshot can still be restored.
"""
