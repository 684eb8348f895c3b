"""The project phase: what needs more than one file. Name resolution over the project, the call
graph and what runs in a capture, and the findings judged on it (`phase.Project`)."""
