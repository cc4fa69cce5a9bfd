"""The phases of the work, each a use case run by the face, grouped as the work flows:

- `scan`: rollouts discovered, registered, changed or gone;
- `stage_one`: each session distilled into one stored output (reduction, the input within its
  budget, which remembered sessions it used);
- `phase_two`: the outputs consolidated into the memory under the lease, slice by slice,
  with the written summary and the skill proposals of the run;
- `publish`: the memory folder written from the database's current version;
- `review`: an admin's decisions on pending versions and proposed skills;
- `add_note` and `note_files`: a fact handed over directly (a note, a repository check) and
  its file;
- `leases` (the heartbeat every claim shares) and `worker` (the pass that strings them together).

They orchestrate the store (`consolidator.db`), the model (`consolidator.backends`) and the pure
rules (`consolidator.memory`, `consolidator.sources`, `consolidator.skills`); they own no SQL and
no prompt.
"""
