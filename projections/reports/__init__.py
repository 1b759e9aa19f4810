"""Readers and reports over the read models: audits, history, trees, diffs, exports, the served
pages."""
