"""The phases of the work, each a use case run by the face: scan, reduce, stage one, phase two
(with its slices), publish and materialize, usage, notes, the lease heartbeat and the pass that
strings them together.

They orchestrate the store (`consolidator.db`), the model (`consolidator.backends`) and the pure
rules (`consolidator.memory`, `consolidator.sources`, `consolidator.skills`); they own no SQL and
no prompt.
"""
