"""`python -m consolidator`: the same entry point as the `consolidator` console script."""

from __future__ import annotations

from consolidator.face.cli import main

if __name__ == "__main__":
    main()
