"""Render a graph picture's HTML page to PNG with Debian's headless chromium, to look at it.

    python scripts/screenshot_graph_picture.py PAGE.html OUT.png [--size 1200,900]

Uses the system `chromium` (apt-get install chromium); exits 3 when it is not installed.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def screenshot(page: Path, png: Path, size: str = "1200,900") -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise FileNotFoundError("chromium is not installed")
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [
                browser,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                f"--user-data-dir={profile}",
                f"--window-size={size}",
                f"--screenshot={png.resolve()}",
                page.resolve().as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("page", type=Path)
    parser.add_argument("png", type=Path)
    parser.add_argument("--size", default="1200,900", help="window WIDTH,HEIGHT in pixels")
    args = parser.parse_args()
    try:
        screenshot(args.page, args.png, args.size)
    except FileNotFoundError as error:
        print(f"screenshot: {error}", file=sys.stderr)
        return 3
    print(args.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
