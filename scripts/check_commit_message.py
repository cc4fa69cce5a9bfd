"""The `commit-msg` check: a subject of at most 72 characters, then a blank line before a body.

pre-commit passes the path of the message file; lines git treats as comments are ignored.
Exit 1 with one line per problem, so the commit can be re-worded.
"""

from __future__ import annotations

import sys
from pathlib import Path

MAX_SUBJECT = 72


def problems(message: str) -> list[str]:
    """What is wrong with a commit message's shape; empty when it is fine."""
    lines = [line for line in message.splitlines() if not line.startswith("#")]
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines or not lines[0].strip():
        return ["the first line (the subject) is empty"]
    found = []
    subject = lines[0]
    if len(subject) > MAX_SUBJECT:
        found.append(f"the subject is {len(subject)} characters; at most {MAX_SUBJECT}")
    if subject.rstrip().endswith("."):
        found.append("the subject ends with a full stop")
    if len(lines) > 1 and lines[1].strip():
        found.append("the second line must be blank, between the subject and the body")
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: check_commit_message.py COMMIT_MSG_FILE", file=sys.stderr)
        return 2
    found = problems(Path(argv[1]).read_text(encoding="utf-8"))
    for problem in found:
        print(f"commit message: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
