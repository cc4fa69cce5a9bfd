"""Stage one: each finished session read, reduced, redacted and distilled into one stored
output, under a claim per thread (`run`), from an input built within a budget (`input`)."""
