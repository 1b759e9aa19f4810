"""The release gate: checks over the evidence recorded at import (`lineage audit`), the
skill's verdict per run and batch, its matrix, parity and report.
"""
