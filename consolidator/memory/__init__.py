"""The long-term memory as data: its model, its Markdown projection, forgetting and merging.

Everything here is pure (no database, no model calls), so phase two, the commit gate and the
admin commands share one deterministic implementation that unit tests can cover completely.
"""
