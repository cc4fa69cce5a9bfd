"""Secret redaction and threat scanning for text that crosses a trust boundary.

`redaction.redact` before rollout text leaves the process or is stored; `threats.scan_threats`
before anything a model writes may reach `MEMORY.md`; `invisible` for the characters that
render as nothing; `names` for names that come from outside (ids, paths, cwds, slugs). Each is
imported from its own module, so that stripping invisible characters does not load the secret
detectors.
"""
