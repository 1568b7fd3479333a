#!/usr/bin/env python3
"""Install requirements (the wheel with an extra, say) with every dependency verified
against requirements.lock's hashes.

``pip install -c requirements.lock WHEEL`` cannot: a constraints file with hashes turns on
pip's hash-checking mode, which then wants a hash for the wheel too. So, with any Python
and its pip (no third-party module)::

    1. resolve: pip install --dry-run --report with the lock's pins as constraints;
    2. install what that resolution names, from the lock's own lines, --require-hashes
       --no-deps (a dependency missing from the lock is refused by name);
    3. install the files named on the command line (the wheel) --no-deps.

Usage: ``pip_locked.py [--pip "PIP ARGS"] [--lock FILE] [--build-constraint FILE]
REQUIREMENT...``; ``--pip`` is the pip command to run (default: this Python's
``-m pip``; e.g. ``"/opt/build/bin/pip --python /opt/monitor/bin/python"``).
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

_PIN = re.compile(r"^([A-Za-z0-9_.-]+)==(\S+)")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def entries(lock: str) -> dict[str, tuple[str, str]]:
    """``canonical name -> (pin line, the pin's full text with its hashes)``."""
    out: dict[str, tuple[str, str]] = {}
    name = None
    for line in lock.splitlines():
        m = _PIN.match(line.strip())
        if m:
            name = canonical(m.group(1))
            out[name] = (f"{m.group(1)}=={m.group(2)}", line + "\n")
        elif name and line.startswith((" ", "\t")):
            pin, text = out[name]
            out[name] = (pin, text + line + "\n")
        else:
            name = None
    return out


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pip", default=f"{shlex.quote(sys.executable)} -m pip")
    p.add_argument("--lock", default=str(Path(__file__).resolve().parents[1] / "requirements.lock"))
    p.add_argument("--build-constraint", default=None)
    p.add_argument("requirements", nargs="+")
    args = p.parse_args(argv)
    pip = shlex.split(args.pip)
    lock = entries(Path(args.lock).read_text())
    build = ["--build-constraint", args.build_constraint] if args.build_constraint else []
    with tempfile.TemporaryDirectory() as tmp:
        pins = Path(tmp) / "pins.txt"
        pins.write_text("".join(pin + "\n" for pin, _ in lock.values()))
        report = Path(tmp) / "report.json"
        subprocess.run(
            [*pip, "install", "--dry-run", "--ignore-installed", "--quiet", "--report",
             str(report), "--constraint", str(pins), *build, *args.requirements],
            check=True,
        )  # fmt: skip
        resolved = json.loads(report.read_text())["install"]
        hashed, local, missing = [], [], []
        for item in resolved:
            name = canonical(item["metadata"]["name"])
            url = item["download_info"]["url"]
            if name in lock:
                hashed.append(lock[name][1])
            elif item.get("requested") and url.startswith("file:"):
                local.append(url)  # a file named on the command line (the wheel)
            else:
                missing.append(f"{item['metadata']['name']}=={item['metadata']['version']}")
        if missing:
            print(f"pip_locked: not in {args.lock}: {', '.join(missing)}", file=sys.stderr)
            return 1
        deps = Path(tmp) / "hashed.txt"
        deps.write_text("".join(hashed))
        subprocess.run(
            [*pip, "install", "--require-hashes", "--no-deps", *build, "-r", str(deps)],
            check=True,
        )
        if local:
            subprocess.run([*pip, "install", "--no-deps", *local], check=True)
    print(f"pip_locked: {len(hashed)} dependencies verified by hash, {len(local)} local")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
