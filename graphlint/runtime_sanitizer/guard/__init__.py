"""Sanitized replay: the guard installed into torch while a program runs (`ReplayGuard`), and
what it needs to place and publish its findings."""
