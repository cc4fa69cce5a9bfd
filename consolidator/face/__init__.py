"""The face: how people and agents reach the worker (command line, daemon, metrics, MCP server,
the session-start digest and log output).

It parses, wires settings to the phases and turns errors into exit codes; it holds no rule of
its own. Nothing below it imports it.
"""
