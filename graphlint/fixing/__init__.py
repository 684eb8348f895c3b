"""Fixes: what a fix does, as data (`ops`), carried out on the file's libcst tree (`edits`),
applied all-or-nothing per file (`apply`), and `--add-noqa` (`add_noqa`)."""
