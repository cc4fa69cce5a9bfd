"""The offline backend: stage one and phase two without a model.

`backend` is the `Backend` itself; `session`, `commands` and `prose` read a rollout and word
its notes (`consolidator.memory.offline_notes`), which stage one stores as data for phase two
and skill detection; `consolidation` is the offline phase two.
"""
