"""Floor 1, the ground: mechanisms every other floor uses and none of LIMBO's concepts —
errors for the two audiences, canonical hashing, seeded randomness, per-object memos, wall-clock
facts, provenance, interrupts, secret scrubbing, and the one registry of extension kinds."""
