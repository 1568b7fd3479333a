"""A throwaway certificate authority for tests and the lab: a CA, a server certificate for
127.0.0.1/localhost and client certificates, made with the ``openssl`` CLI.

>>> import tempfile, pathlib
>>> with tempfile.TemporaryDirectory() as d:
...     pki = make_pki(pathlib.Path(d))
...     sorted(p.name for p in pathlib.Path(d).iterdir() if p.suffix == ".pem")[:3]
['ca.key.pem', 'ca.pem', 'client.key.pem']
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Pki:
    """The files (PEM), in ``folder``: keys unencrypted, mode 0600."""

    folder: Path
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path

    def client(self, name: str) -> tuple[Path, Path]:
        """Another client certificate signed by the CA: ``(cert, key)``, CN ``name``."""
        return _leaf(self.folder, name, self.ca, f"DNS:{name}", client=True)

    def foreign_client(self, name: str) -> tuple[Path, Path]:
        """A client certificate signed by a CA of its own (one the server does not trust)."""
        other = self.folder / f"{name}-ca"
        other.mkdir(mode=0o700, exist_ok=True)
        ca = _ca(other, f"{name} CA")
        return _leaf(other, name, ca, f"DNS:{name}", client=True)


def _openssl(args: list[str], cwd: Path) -> None:
    if shutil.which("openssl") is None:
        raise RuntimeError("certificates for tests need the `openssl` CLI on PATH")
    proc = subprocess.run(
        ["openssl", *args], cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    if proc.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed: {proc.stderr.strip()[-2000:]}")


def _ca(folder: Path, cn: str) -> Path:
    _openssl(
        ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30", "-subj", f"/CN={cn}",
         "-keyout", "ca.key.pem", "-out", "ca.pem",
         "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=keyCertSign"],
        folder,
    )  # fmt: skip
    (folder / "ca.key.pem").chmod(0o600)
    return folder / "ca.pem"


def _leaf(folder: Path, name: str, ca: Path, san: str, *, client: bool) -> tuple[Path, Path]:
    usage = "clientAuth" if client else "serverAuth"
    ext = folder / f"{name}.ext"
    ext.write_text(f"subjectAltName={san}\nextendedKeyUsage={usage}\n")
    _openssl(
        ["req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}",
         "-keyout", f"{name}.key.pem", "-out", f"{name}.csr"],
        folder,
    )  # fmt: skip
    _openssl(
        ["x509", "-req", "-in", f"{name}.csr", "-CA", str(ca), "-CAkey",
         str(ca.with_name("ca.key.pem")), "-CAcreateserial", "-days", "30",
         "-extfile", ext.name, "-out", f"{name}.pem"],
        folder,
    )  # fmt: skip
    (folder / f"{name}.key.pem").chmod(0o600)
    return folder / f"{name}.pem", folder / f"{name}.key.pem"


def make_pki(folder: Path) -> Pki:
    """A CA, a server certificate (SAN 127.0.0.1, ::1, localhost) and a client one (CN and
    SAN DNS ``prometheus``), written into ``folder``."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    ca = _ca(folder, "monitor test CA")
    server = _leaf(folder, "server", ca, "IP:127.0.0.1,IP:::1,DNS:localhost", client=False)
    client = _leaf(folder, "client", ca, "DNS:prometheus", client=True)
    return Pki(folder, ca, *server, *client)
