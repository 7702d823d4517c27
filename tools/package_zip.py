"""The kafka_rebalancer package as a zip for spark-submit --py-files, so Spark workers that do not have the
package installed can import it (the plan job's Python UDFs run there).

    python -m tools.package_zip [DEST]     default: dist/kafka_rebalancer.zip
"""

from __future__ import annotations

import os
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "kafka_rebalancer"
DEFAULT_ZIP = REPO / "dist" / "kafka_rebalancer.zip"


def build_package_zip(dest: Path = DEFAULT_ZIP) -> Path:
    """Write the zip atomically (a job being submitted never reads half a file); fixed timestamps, sorted."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_suffix(f".{os.getpid()}.partial")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(PACKAGE.rglob("*")):
            if path.is_file() and path.suffix in (".py", ".json", ".yaml") and "__pycache__" not in path.parts:
                info = zipfile.ZipInfo(str(path.relative_to(PACKAGE.parent)), date_time=(2026, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, path.read_bytes())
    partial.replace(dest)
    return dest


if __name__ == "__main__":
    print(build_package_zip(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_ZIP))
