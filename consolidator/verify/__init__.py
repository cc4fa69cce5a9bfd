"""Memory is a lead, not an authority: what an entry names, checked against the folder now.

An entry can be right when written and wrong when read (a script renamed, a Make target
dropped, the project moved to a newer Python). These checks read the block's folder, never
anything outside it, never run a command, skip large files and stop at a time budget, so a
session-start hook can afford them. Each kind of claim has its own rule module (`paths`,
`commands`, `runtimes`); `entry.verify_text` combines them into one verdict per entry, whose
reason is a few words an agent can act on ("not found now", "repo says >=3.12").
"""
