"""The parameterized launcher: a performance tool beside the sanitizer, not part of it. It
re-points a captured graph at the caller's tensors (needs CUDA), using the sanitizer's capture
and analysis to know which kernel-argument words are input pointers."""
