"""Kept for users' imports: the launcher lives in `graphlint.launcher` (a performance tool
beside the sanitizer), and the README's `from graphlint.runtime_sanitizer.launcher import
ParameterizedLauncher` still works through this re-export."""

from graphlint.launcher.launcher import DEVICE_THRESHOLD, LauncherRefused, ParameterizedLauncher

__all__ = ["DEVICE_THRESHOLD", "LauncherRefused", "ParameterizedLauncher"]
