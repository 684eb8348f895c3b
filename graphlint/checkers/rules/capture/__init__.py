"""GL1xx: code that must not run inside a CUDA graph capture (judged by capture reach)."""
