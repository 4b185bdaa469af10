#!/usr/bin/env python3
"""Build ``memory`` as one executable file that needs nothing but a python3 (>= 3.9).

    python3 sandbox-cli/build_zipapp.py -o dist/memory.pyz

bundles ``memory_cli`` and ``memoryd_client`` (both standard library only) into a zipapp
(PEP 441).  The build is reproducible: same sources, same bytes.  Copy the file into a
sandbox image (e.g. as /usr/local/bin/memory) and run it like any command.
"""

from __future__ import annotations

import argparse
import os
import sys
import zipfile
from pathlib import Path
from typing import Iterator, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PACKAGES = (HERE / "memory_cli", REPO / "client" / "memoryd_client")
MAIN = b"import sys\nfrom memory_cli.cli import main\nsys.exit(main())\n"
# A fixed timestamp, so that the archive depends on the sources only.
EPOCH = (1980, 1, 1, 0, 0, 0)


def _sources() -> Iterator[Tuple[str, bytes]]:
    for package in PACKAGES:
        for path in sorted(package.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            yield path.relative_to(package.parent).as_posix(), path.read_bytes()


def build(output: Path, interpreter: str = "/usr/bin/env python3") -> Path:
    output.parent.mkdir(parents=True, exist_ok=True)
    entries: List[Tuple[str, bytes]] = [("__main__.py", MAIN), *_sources()]
    temporary = output.with_name(output.name + ".tmp")
    with open(temporary, "wb") as handle:
        handle.write(b"#!" + interpreter.encode("utf-8") + b"\n")
        with zipfile.ZipFile(handle, "w") as archive:
            for name, data in entries:
                info = zipfile.ZipInfo(name, date_time=EPOCH)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                archive.writestr(info, data)
    os.chmod(temporary, 0o755)
    os.replace(temporary, output)
    return output


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="Build the `memory` zipapp.")
    parser.add_argument("-o", "--output", default="dist/memory.pyz", help="where to write it (default dist/memory.pyz)")
    parser.add_argument(
        "--python", default="/usr/bin/env python3", help='interpreter for the #! line (default "/usr/bin/env python3")'
    )
    args = parser.parse_args(argv)
    path = build(Path(args.output), args.python)
    print(f"built {path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
