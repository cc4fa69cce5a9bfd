"""The offline backend: stage one and phase two without a model (`backend.ExtractiveBackend`)."""
