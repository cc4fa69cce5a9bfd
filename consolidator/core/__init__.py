"""The ground floor every layer may use: settings, the exception hierarchy with exit codes, the
database URL grammar, where prompts and migrations live, and the private state directory.

It imports no other layer of the package (an import contract in pyproject.toml checks it).
"""
