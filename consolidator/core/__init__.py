"""The ground floor every layer may use: settings, the exception hierarchy with exit codes, the
database URL grammar, where prompts and migrations live, the private state directory, and the
names of the language runtimes the memory and the repository checks both read.

It imports no other layer of the package (an import contract in pyproject.toml checks it).
"""
