"""The offline backend: stage one and phase two without a model.

`backend` is the `Backend` itself; `session`, `commands` and `prose` read a rollout and word
its notes; `notes` is the Markdown layout stage one writes and phase two reads back;
`consolidation` is the offline phase two.
"""
