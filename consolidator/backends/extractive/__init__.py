"""The offline backend: stage one and phase two without a model.

`backend` is the `Backend` itself; `session`, `commands` and `prose` read a rollout and word
its notes in the layout of `consolidator.memory.offline_notes`, which phase two (and skill
detection) read back; `consolidation` is the offline phase two.
"""
