"""The flows: analyses that ride the core's flow skeleton after the binder (`replay`, `stream`).
A flow imports the core, never another flow; it runs only when an enabled detector listens to
one of its events."""
