"""The ground floor every layer may use: settings, the exception hierarchy with exit codes, where
prompts and migrations live, and the private state directory."""
