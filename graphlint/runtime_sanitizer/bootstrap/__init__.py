"""Start-up hook of the child interpreter that `graphlint sanitize` runs: the directory of
this package is put first on the child's PYTHONPATH, so its `sitecustomize` runs before the
program (see `run_program`)."""
