"""The language server's settings from the editor: `preview` and `followValues`, as
`initializationOptions` or `workspace/didChangeConfiguration` send them.

Each overrides the project's configuration as `--preview` / `--follow-values` do on the
command line; null (or leaving it out) lets each file's configuration decide. The settings may
sit under a `graphlint` section (how editors group a server's settings) or at the top. A value
of the wrong type is reported and the previous value kept, so a typo loses nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

# the setting's name(s) as an editor may spell them -> the field it sets
_NAMES = {"preview": "preview", "followValues": "follow_values", "follow-values": "follow_values"}


@dataclass(frozen=True)
class EditorSettings:
    preview: bool | None = None  # None: the configuration's
    follow_values: bool | None = None


def updated(settings: EditorSettings, raw: object) -> tuple[EditorSettings, list[str]]:
    """``settings`` with what ``raw`` (the editor's JSON) sets, and a message for each value
    that could not be used."""
    if raw is None:
        return settings, []
    if isinstance(raw, dict) and "graphlint" in raw:
        raw = raw["graphlint"]
    if not isinstance(raw, dict):
        return settings, [f"graphlint: settings must be an object, not {type(raw).__name__}; ignored"]
    problems = []
    for name, value in raw.items():
        field = _NAMES.get(name)
        if field is None:
            continue  # another tool's setting, or a newer graphlint's
        if value is not None and not isinstance(value, bool):
            problems.append(f"graphlint: setting {name!r} must be true, false or null, not {value!r}; ignored")
            continue
        settings = replace(settings, **{field: value})
    return settings, problems
