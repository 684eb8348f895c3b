"""ruff's configuration habits on the command line: --show-files, --show-settings,
--exclude, --extend-exclude, --per-file-ignores, --config KEY=VALUE, and a standalone
graphlint.toml / .graphlint.toml."""

from __future__ import annotations

import json

from conftest import HAZARD, run_cli


def _codes(result) -> list[tuple[str, str]]:
    assert result.returncode in (0, 1), result.stderr
    return sorted((f["path"], f["code"]) for f in json.loads(result.stdout))


def _check(root, *args: str):
    return run_cli("check", "--no-cache", "--format", "json", *args, cwd=root)


def _settings(root, *args: str) -> dict[str, str]:
    result = run_cli("check", "--show-settings", *args, cwd=root)
    assert result.returncode == 0, result.stderr
    return dict(line.split(" = ", 1) for line in result.stdout.splitlines() if " = " in line) | {
        "source": result.stdout.splitlines()[1].removeprefix("Settings path: ")
    }


def test_show_files_lists_what_would_be_checked_and_checks_nothing(write_tree) -> None:
    root = write_tree({"pyproject.toml": "[tool.graphlint]\nexclude = ['gen']\n", "a.py": HAZARD, "gen/g.py": HAZARD})
    result = run_cli("check", "--show-files", ".", cwd=root)
    assert (result.returncode, result.stdout, result.stderr) == (0, "./a.py\n", "")
    assert not (root / ".graphlint_cache").exists()


def test_exclude_replaces_the_configured_patterns_and_extend_exclude_adds(write_tree) -> None:
    root = write_tree(
        {
            "pyproject.toml": "[tool.graphlint]\nexclude = ['gen']\nextend-exclude = ['old']\n",
            "a.py": HAZARD,
            "gen/g.py": HAZARD,
            "old/o.py": HAZARD,
            "tests/t.py": HAZARD,
        }
    )

    def shown(*args: str) -> list[str]:
        return run_cli("check", "--show-files", *args, ".", cwd=root).stdout.split()

    assert shown("--exclude", "tests") == ["./a.py", "./gen/g.py"]
    assert shown("--extend-exclude", "tests") == ["./a.py"]
    assert shown("--exclude", "tests,gen", "--extend-exclude", "a.py") == []
    assert {p for p, _ in _codes(_check(root, "--extend-exclude", "tests", "."))} == {"./a.py"}


def test_per_file_ignores_on_the_command_line(write_tree) -> None:
    root = write_tree({"tests/test_x.py": HAZARD, "src/m.py": HAZARD})
    result = _check(root, "--per-file-ignores", "tests/*:GL1", "--per-file-ignores", "src/*:GL111", ".")
    assert _codes(result) == [("./src/m.py", "GL101")]
    bad = run_cli("check", "--per-file-ignores", "tests/*", ".", cwd=root)
    assert bad.returncode == 2 and "PATTERN:CODES" in bad.stderr


def test_config_key_value_overrides_every_configuration_and_a_file_still_works(write_tree) -> None:
    root = write_tree(
        {
            "pyproject.toml": "[tool.graphlint]\nselect = ['GL111']\n",
            "a.py": HAZARD,
            "sub/pyproject.toml": "[tool.graphlint]\nignore = ['GL101']\n",
            "sub/b.py": HAZARD,
            "strict.toml": "select = ['GL101']\n",
        }
    )
    assert _codes(_check(root, ".")) == [("./a.py", "GL111"), ("./sub/b.py", "GL111")]
    overridden = _check(root, "--config", "select = ['GL101']", "--config", "ignore = []", ".")
    assert _codes(overridden) == [("./a.py", "GL101"), ("./sub/b.py", "GL101")]
    assert _codes(_check(root, "--config", "strict.toml", ".")) == [("./a.py", "GL101"), ("./sub/b.py", "GL101")]
    both = _check(root, "--config", "strict.toml", "--config", "ignore = ['GL101']", ".")
    assert _codes(both) == []
    for bad, said in (("bogus = 1", "unknown key 'bogus'"), ("select = [", "not a TOML"), ("nofile", "no such")):
        result = run_cli("check", "--config", bad, ".", cwd=root)
        assert result.returncode == 2 and said in result.stderr, result.stderr


def test_a_standalone_graphlint_toml_wins_over_pyproject_in_its_folder(write_tree) -> None:
    root = write_tree(
        {
            "pyproject.toml": "[tool.graphlint]\nselect = ['GL101']\n",
            "graphlint.toml": "select = ['GL111']\n",
            "a.py": HAZARD,
            "sub/.graphlint.toml": "ignore = ['GL111']\n",
            "sub/graphlint.toml": "select = ['GL101']\n",
            "sub/b.py": HAZARD,
        }
    )
    assert _codes(_check(root, ".")) == [("./a.py", "GL111"), ("./sub/b.py", "GL101")]
    assert _settings(root, "a.py")["source"] == str(root / "graphlint.toml")
    assert _settings(root, "sub/b.py")["source"] == str(root / "sub" / ".graphlint.toml")


def test_show_settings_prints_the_resolved_settings_of_a_file(write_tree) -> None:
    root = write_tree(
        {"pyproject.toml": "[tool.graphlint]\nignore = ['GL111']\n", "pkg/__init__.py": "", "pkg/m.py": HAZARD}
    )
    settings = _settings(root, "pkg/m.py", "--config", "preview = true", "--per-file-ignores", "pkg/*:GL101")
    assert settings["source"] == str(root / "pyproject.toml")
    assert settings["module"] == '"pkg.m"'
    assert json.loads(settings["ignore"]) == ["GL111"]
    assert json.loads(settings["per-file-ignores"]) == {"pkg/*": ["GL101"]}
    assert settings["preview"] == "true"
    enabled = json.loads(settings["enabled"])
    assert "GL101" not in enabled and "GL111" not in enabled and "GL102" in enabled
