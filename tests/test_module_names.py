"""Module names from the import root, across folders without `__init__.py` (PEP 420).

A user's `from pkg.srt.layers import f` must reach `pkg/srt/layers.py` even when `srt/` has
no `__init__.py` (SGLang ships hundreds of such folders); otherwise nothing that a capture
calls in another file is followed.
"""

from __future__ import annotations

import json
import os

from conftest import run_cli
from graphlint.config import ConfigResolver
from graphlint.sources.discovery import discover


def _modules(root, *paths: str) -> dict[str, str]:
    files = discover([str(root / p) for p in paths or ("",)], ConfigResolver(cwd=root))
    return {f.path.relative_to(root).as_posix(): f.module for f in files}


def test_a_namespace_folder_inside_a_package_keeps_the_package_prefix(write_tree) -> None:
    root = write_tree(
        {
            "pkg/__init__.py": "",
            "pkg/srt/models/llama.py": "",
            "pkg/srt/models/__init__.py": "",
            "pkg/srt/layers/linear.py": "",
            "pkg/srt/layers/ops/kernel.py": "",
        }
    )
    assert _modules(root, "pkg") == {
        "pkg/__init__.py": "pkg",
        "pkg/srt/models/__init__.py": "pkg.srt.models",
        "pkg/srt/models/llama.py": "pkg.srt.models.llama",
        "pkg/srt/layers/linear.py": "pkg.srt.layers.linear",
        "pkg/srt/layers/ops/kernel.py": "pkg.srt.layers.ops.kernel",
    }


def test_the_name_does_not_depend_on_which_folder_was_checked(write_tree) -> None:
    root = write_tree({"pkg/__init__.py": "", "pkg/srt/layers/linear.py": ""})
    assert _modules(root, "pkg/srt/layers") == {"pkg/srt/layers/linear.py": "pkg.srt.layers.linear"}


def test_scripts_outside_any_package_keep_bare_names(write_tree) -> None:
    root = write_tree({"pyproject.toml": "", "scripts/train.py": "", "scripts/tools/eval.py": ""})
    assert _modules(root, "scripts") == {"scripts/train.py": "train", "scripts/tools/eval.py": "eval"}


def test_a_nested_project_root_is_its_own_import_root(write_tree) -> None:
    # A vendored extension with its own setup.py inside a package is not part of that package.
    root = write_tree(
        {"pkg/__init__.py": "", "pkg/csrc/ext/setup.py": "", "pkg/csrc/ext/vext/__init__.py": "", "pkg/csrc/x.py": ""}
    )
    modules = _modules(root, "pkg/csrc")
    assert modules["pkg/csrc/ext/vext/__init__.py"] == "vext"
    assert modules["pkg/csrc/ext/setup.py"] == "setup"
    assert modules["pkg/csrc/x.py"] == "pkg.csrc.x"


def test_a_package_folder_whose_files_import_its_children_absolutely_is_an_import_root(write_tree) -> None:
    # main.py runs as a script from its folder: `from nested.jobs import run` works only so.
    root = write_tree(
        {
            "app/__init__.py": "",
            "app/main.py": "from nested.jobs import run\n",
            "app/nested/__init__.py": "",
            "app/nested/jobs.py": "from .util import helper\n",
            "app/nested/util.py": "",
        }
    )
    assert _modules(root, "app") == {
        "app/__init__.py": "",
        "app/main.py": "main",
        "app/nested/__init__.py": "nested",
        "app/nested/jobs.py": "nested.jobs",
        "app/nested/util.py": "nested.util",
    }


def test_a_library_import_sharing_a_sub_package_name_keeps_the_package_prefix(write_tree) -> None:
    # `import onnx.helper` is the library: the package's own onnx/ has no helper module.
    root = write_tree({"lib/__init__.py": "import onnx.helper\nfrom onnx import shape\n", "lib/onnx/__init__.py": ""})
    assert _modules(root, "lib") == {"lib/__init__.py": "lib", "lib/onnx/__init__.py": "lib.onnx"}


RUNNER = """\
import torch
from pkg.srt.layers.linear import apply
from ..layers import norm


def capture(x):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        apply(x)
        norm.rms(x)
"""


def test_absolute_and_relative_imports_across_namespace_folders_resolve(write_tree) -> None:
    root = write_tree(
        {
            "pkg/__init__.py": "",
            "pkg/srt/models/runner.py": RUNNER,
            "pkg/srt/layers/linear.py": "def apply(x):\n    return x * 2\n",
            "pkg/srt/layers/norm.py": "def rms(x):\n    return x / 2\n",
        }
    )
    result = run_cli("captures", "--no-cache", "--format", "json", "pkg", cwd=root)
    assert result.returncode == 0, result.stderr
    (region,) = json.loads(result.stdout)["regions"]
    statuses = {c["expression"]: (c["status"], c["targets"]) for c in region["callables"]}
    assert statuses == {
        "pkg.srt.layers.linear.apply": ("resolved", ["pkg.srt.layers.linear.apply"]),
        "pkg.srt.layers.norm.rms": ("resolved", ["pkg.srt.layers.norm.rms"]),
    }


BENCH = """\
import torch
import helpers


def run(x):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        helpers.f(x)
"""


def _bench_targets(root) -> list:
    result = run_cli("captures", "--no-cache", "--format", "json", "pkg", cwd=root)
    assert result.returncode == 0, result.stderr
    (region,) = json.loads(result.stdout)["regions"]
    return [(c["status"], c["targets"]) for c in region["callables"]]


def test_a_script_in_a_namespace_folder_imports_its_sibling_by_bare_name(write_tree) -> None:
    files = {"pkg/__init__.py": "", "pkg/tools/helpers.py": "def f(x):\n    return x\n", "pkg/tools/bench.py": BENCH}
    assert _bench_targets(write_tree(files)) == [("resolved", ["pkg.tools.helpers.f"])]


def test_a_bare_name_imported_from_another_folder_too_stays_unresolved(write_tree) -> None:
    # `import helpers` in pkg/other may mean another `helpers` entirely: never guessed.
    files = {
        "pkg/__init__.py": "",
        "pkg/tools/helpers.py": "def f(x):\n    return x\n",
        "pkg/tools/bench.py": BENCH,
        "pkg/other/user.py": "import helpers\n",
    }
    assert _bench_targets(write_tree(files)) == [("outside", [])]


def test_a_folder_no_import_can_name_ends_the_crawl_even_with_an_init(write_tree) -> None:
    """`micro-benchmark/__init__.py` (PyCG's benchmark) makes no package: `import micro-benchmark`
    is not Python, so the scripts below it keep their bare names and import each other so."""
    root = write_tree(
        {
            "micro-benchmark/__init__.py": "",
            "micro-benchmark/snippets/args/call/main.py": "import helper\n",
            "micro-benchmark/snippets/args/call/helper.py": "",
        }
    )
    modules = _modules(root, "micro-benchmark/snippets/args/call")
    assert modules == {
        "micro-benchmark/snippets/args/call/main.py": "main",
        "micro-benchmark/snippets/args/call/helper.py": "helper",
    }


def test_a_namespace_folder_above_the_top_package_is_kept_when_the_package_imports_through_it(write_tree) -> None:
    # megatron-core's wheel: `megatron/core/...` with no `megatron/__init__.py`; its files
    # import `megatron.core...`, so that is the module name (a PEP 420 portion at the top).
    files = {
        "ns/core/__init__.py": "from ns.core import layers\n",
        "ns/core/layers.py": "",
        "ns/core/sub/__init__.py": "",
        "ns/core/sub/mod.py": "",
    }
    assert _modules(write_tree(files), "ns") == {
        "ns/core/__init__.py": "ns.core",
        "ns/core/layers.py": "ns.core.layers",
        "ns/core/sub/__init__.py": "ns.core.sub",
        "ns/core/sub/mod.py": "ns.core.sub.mod",
    }


def test_a_folder_above_the_top_package_that_no_import_names_is_not_part_of_the_name(write_tree) -> None:
    # `src/` layouts: the package imports itself as `pkg`, never `src.pkg`.
    files = {"src/pkg/__init__.py": "from pkg import mod\n", "src/pkg/mod.py": ""}
    assert _modules(write_tree(files), "src") == {"src/pkg/__init__.py": "pkg", "src/pkg/mod.py": "pkg.mod"}


NAMESPACED_RUNNER = """\
import torch
from ns.core.layers import apply


def capture(x):
    with torch.cuda.graph(torch.cuda.CUDAGraph()):
        apply(x)
"""


def test_imports_through_a_top_namespace_folder_resolve_across_files(write_tree) -> None:
    root = write_tree(
        {
            "ns/core/__init__.py": "",
            "ns/core/runner.py": NAMESPACED_RUNNER,
            "ns/core/layers.py": "def apply(x):\n    return x.sum().item()\n",
        }
    )
    result = run_cli("check", "--no-cache", "--select", "GL101", "--format", "json", "ns", cwd=root)
    assert [(f["path"], f["line"]) for f in json.loads(result.stdout)] == [("ns/core/layers.py", 2)]


# torchtune's layout: `tests/` (no `__init__.py`) mirrors the package, sub-packages and all,
# and a recipe compiles a function the package re-exports from its `__init__.py`.
MIRRORED = {
    "pyproject.toml": "",
    "tpkg/__init__.py": "",
    "tpkg/generation/__init__.py": "from tpkg.generation._generation import next_token\n",
    "tpkg/generation/_generation.py": "def next_token(x):\n    return x.sum().item()\n",
    "recipes/generate.py": (
        "import torch\n\nfrom tpkg import generation\n\n"
        'step = torch.compile(generation.next_token, mode="reduce-overhead")\n'
    ),
    "tests/tpkg/__init__.py": "",
    "tests/tpkg/generation/__init__.py": "",
    "tests/tpkg/generation/test_generation.py": (
        "import torch\n\nfrom tpkg.generation import next_token\n\n\n"
        "def test_next_token():\n    assert next_token(torch.ones(2)) == 2\n"
    ),
}


def test_a_test_tree_mirroring_the_package_keeps_its_own_folder_in_its_names(write_tree) -> None:
    modules = _modules(write_tree(MIRRORED))
    assert modules["tpkg/generation/__init__.py"] == "tpkg.generation"
    assert modules["tests/tpkg/generation/__init__.py"] == "tests.tpkg.generation"
    assert modules["tests/tpkg/generation/test_generation.py"] == "tests.tpkg.generation.test_generation"
    assert not any("%" in module for module in modules.values())


def test_a_src_layout_package_is_the_real_one_for_its_mirrored_tests(write_tree) -> None:
    files = {"pyproject.toml": "", "src/tpkg/__init__.py": "", "tests/tpkg/__init__.py": "", "tests/tpkg/t.py": ""}
    modules = _modules(write_tree(files))
    assert modules["src/tpkg/__init__.py"] == "tpkg"
    assert modules["tests/tpkg/t.py"] == "tests.tpkg.t"


def _findings(root, *paths: str) -> list[tuple]:
    result = run_cli("check", "--no-cache", "--format", "json", *paths, cwd=root)
    assert result.returncode in (0, 1), result.stderr
    norm = os.path.normpath
    return [
        (f["code"], norm(f["path"]), f["line"], [(norm(s["path"]), s["line"]) for s in f["call_path"]])
        for f in json.loads(result.stdout)
    ]


def test_checking_the_root_of_a_mirrored_tree_finds_what_naming_the_packages_finds(write_tree) -> None:
    root = write_tree(MIRRORED)
    expected = [("GL101", "tpkg/generation/_generation.py", 2, [("recipes/generate.py", 5)])]
    assert _findings(root, "recipes", "tpkg") == expected
    assert _findings(root, ".") == expected
