"""Model backends: `openai` (any OpenAI-compatible endpoint) and `extractive` (offline)."""
