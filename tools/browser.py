"""Debian's Chromium for the browser tests (Playwright drives it; it cannot download browsers here).

    python -m tools.browser ensure     # installs the `chromium` package once (apt-get; needs root)
"""

from __future__ import annotations

import shutil
import subprocess
import sys

PACKAGE = "chromium"


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def ensure() -> str:
    found = chromium_path()
    if found:
        return found
    if shutil.which("apt-get") is None:
        raise SystemExit("Chromium is missing and there is no apt-get: install Chromium and put it on the PATH")
    for cmd in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", PACKAGE]):
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed (root needed):\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
    found = chromium_path()
    if not found:
        raise SystemExit(f"apt-get installed {PACKAGE} but no chromium binary is on the PATH")
    return found


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args != ["ensure"]:
        print(__doc__, file=sys.stderr)
        return 2
    print(ensure())
    return 0


if __name__ == "__main__":
    sys.exit(main())
