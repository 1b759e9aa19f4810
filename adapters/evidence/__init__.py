"""Evidence to hand over: the Merkle tree kept beside the log, signed batches, checkpoints,
bundles and Ed25519 keys.
"""
