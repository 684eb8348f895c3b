"""Runs at the start of the child interpreter `graphlint sanitize` starts (never elsewhere):
put the environment back as the user had it, run the user's own `sitecustomize` if there is
one, then start the sanitized session. Only the direct child of `graphlint sanitize` starts
one; the processes the program starts see the user's environment unchanged."""

import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _restore_environment():
    report = os.environ.pop("GRAPHLINT_SANITIZE_REPORT", None)
    parent = os.environ.pop("GRAPHLINT_SANITIZE_PARENT", None)
    original = os.environ.pop("GRAPHLINT_SANITIZE_PYTHONPATH", None)
    if original:
        os.environ["PYTHONPATH"] = original
    else:
        os.environ.pop("PYTHONPATH", None)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    return report if parent == str(os.getppid()) else None


def _chain_user_sitecustomize():
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


_report = _restore_environment()
_chain_user_sitecustomize()
if _report:
    try:
        from graphlint.runtime_sanitizer.session import start
    except ImportError as _error:  # another interpreter, without graphlint: the program still runs
        import json

        with open(_report, "w", encoding="utf-8") as _out:
            json.dump({"reason": f"this interpreter cannot import graphlint ({_error})"}, _out)
    else:
        start(_report)
