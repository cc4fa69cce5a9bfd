"""Rollout adapters (Codex, Claude Code), file discovery and change detection."""
