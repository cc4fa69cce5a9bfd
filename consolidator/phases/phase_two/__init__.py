"""Phase two: the changed stage-one outputs consolidated into the memory under the global
lease (`run`), slice by slice (`slices`, `one_slice`), with what the gate refuses narrowed to
its input."""
