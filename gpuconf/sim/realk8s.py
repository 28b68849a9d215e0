"""A real Kubernetes control plane on 127.0.0.1 for the tests: etcd, kube-apiserver,
kube-scheduler and kube-controller-manager, started from binaries you provide.

The binaries are found only through ``GPUCONF_K8S_BIN`` (a directory holding ``kube-apiserver``,
``kube-scheduler`` and ``kube-controller-manager``) or the ``bin_dir`` argument; etcd through
``GPUCONF_ETCD`` or ``etcd`` on the PATH (Debian's ``etcd-server``). Everything a run needs is
generated per run in a fresh temporary directory: a CA, the apiserver's serving certificate, client
certificates for the admin, the scheduler, the controller-manager and the apiserver's kubelet client,
the service-account signing key, and a kubeconfig per identity. Every component listens on
127.0.0.1 on a free port, so several control planes (pytest-xdist workers) can run side by side.

Usage::

    with RealControlPlane.from_env() as cp:          # RealK8sUnavailable says why it cannot start
        kubeconfig = cp.kubeconfig               # system:masters (admin)
        ...

The apiserver reaches kubelets at their node's InternalIP
(``--kubelet-preferred-address-types=InternalIP,...``) and does not verify their serving
certificates (no ``--kubelet-certificate-authority``), as a kubeadm cluster does by default. Simulated
nodes publish only 127.0.0.0/8 addresses (:mod:`gpuconf.sim.agent`), so nothing else is ever dialled.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import ipaddress
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

__all__ = ["BIN_ENV", "BINARIES", "ETCD_ENV", "RealControlPlane", "RealK8sUnavailable", "find_binaries", "kubeconfig"]

#: The directory holding kube-apiserver, kube-scheduler and kube-controller-manager.
BIN_ENV = "GPUCONF_K8S_BIN"
#: The etcd binary (default: ``etcd`` on the PATH).
ETCD_ENV = "GPUCONF_ETCD"
BINARIES = ("kube-apiserver", "kube-scheduler", "kube-controller-manager")
SERVICE_CIDR = "10.0.0.0/24"
HOST = "127.0.0.1"


class RealK8sUnavailable(Exception):
    """The binaries are missing, or a component did not become ready (the message says which and
    ends with the tail of its log)."""


def find_binaries(bin_dir: str | os.PathLike[str] | None = None,
                  env: Mapping[str, str] = os.environ) -> tuple[Path, Path]:
    """(the Kubernetes binaries' directory, etcd), or RealK8sUnavailable saying what is missing."""
    where = bin_dir if bin_dir is not None else env.get(BIN_ENV)
    if not where:
        raise RealK8sUnavailable(f"{BIN_ENV} is not set (a directory with {', '.join(BINARIES)} v1.36)")
    directory = Path(where)
    missing = [b for b in BINARIES if not os.access(directory / b, os.X_OK)]
    if missing:
        raise RealK8sUnavailable(f"{BIN_ENV}={directory}: no executable {', '.join(missing)} there")
    etcd = env.get(ETCD_ENV) or shutil.which("etcd")
    if not etcd or not os.access(etcd, os.X_OK):
        raise RealK8sUnavailable(f"etcd not found (install Debian's etcd-server, or set {ETCD_ENV})")
    return directory, Path(etcd)


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the process that started it dies (Linux
    PR_SET_PDEATHSIG), so a killed test run leaves no control plane behind."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # 1: PR_SET_PDEATHSIG


def free_port(host: str = HOST) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


# --- certificates ---------------------------------------------------------------------------------


class _Pki:
    """A CA and the certificates it signs (EC P-256), written as PEM files under ``directory``."""

    def __init__(self, directory: Path) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        self.dir = directory
        self._key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpuconf-test-ca")])
        now = datetime.datetime.now(datetime.UTC)
        self._name = name
        self.ca = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                   .public_key(self._key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=2))
                   .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                   .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                                content_commitment=False, key_encipherment=False,
                                                data_encipherment=False, key_agreement=False,
                                                encipher_only=False, decipher_only=False), critical=True)
                   .sign(self._key, hashes.SHA256()))
        self.ca_path = self._write("ca.crt", self._pem(self.ca))
        self._write("ca.key", self._key_pem(self._key))

    @staticmethod
    def _pem(cert: Any) -> bytes:
        from cryptography.hazmat.primitives import serialization

        return bytes(cert.public_bytes(serialization.Encoding.PEM))

    @staticmethod
    def _key_pem(key: Any) -> bytes:
        from cryptography.hazmat.primitives import serialization

        return bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))

    def _write(self, name: str, data: bytes) -> Path:
        path = self.dir / name
        path.write_bytes(data)
        path.chmod(0o600)
        return path

    def issue(self, name: str, common_name: str, *, organization: str | None = None, server: bool = False,
              dns: Iterable[str] = (), ips: Iterable[str] = ()) -> tuple[Path, Path]:
        """(certificate, key) paths of a client (or, with ``server``, serving) certificate."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        key = ec.generate_private_key(ec.SECP256R1())
        attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        if organization:
            attrs.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
        now = datetime.datetime.now(datetime.UTC)
        builder = (x509.CertificateBuilder().subject_name(x509.Name(attrs)).issuer_name(self._name)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=2))
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage(
                       [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]),
                       critical=False))
        alt = [x509.DNSName(d) for d in dns] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
        if alt:
            builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        return self._write(f"{name}.crt", self._pem(cert)), self._write(f"{name}.key", self._key_pem(key))

    def service_account_keys(self) -> tuple[Path, Path]:
        """(private, public) keys signing service-account tokens (RSA 2048, RS256)."""
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                               serialization.PublicFormat.SubjectPublicKeyInfo)
        return self._write("sa.key", self._key_pem(key)), self._write("sa.pub", public)


def kubeconfig(server: str, ca: Path, cert: Path | None = None, key: Path | None = None, *,
               token: str | None = None, user: str = "admin", namespace: str | None = None) -> dict[str, Any]:
    """A kubeconfig with one cluster, user and context (credentials inlined)."""
    def b64(p: Path) -> str:
        return base64.b64encode(p.read_bytes()).decode()

    creds: dict[str, str] = {"token": token} if token else {
        "client-certificate-data": b64(cert), "client-key-data": b64(key)}  # type: ignore[arg-type]
    context: dict[str, str] = {"cluster": "gpuconf-test", "user": user}
    if namespace:
        context["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "gpuconf-test", "cluster": {"server": server,
                                                               "certificate-authority-data": b64(ca)}}],
            "users": [{"name": user, "user": creds}],
            "contexts": [{"name": user, "context": context}], "current-context": user}


# --- the control plane ----------------------------------------------------------------------------


class RealControlPlane:
    """etcd and the three control-plane binaries on 127.0.0.1, free ports, a temporary directory.

    ``start()`` returns once the apiserver is ready, the scheduler and controller-manager are
    healthy and the ``default`` ServiceAccount exists (pods can be created); ``stop()`` ends every
    process and removes the directory (``keep`` leaves it, with the components' logs under
    ``logs/``). ``apiserver_flags`` are added to the apiserver's command line; with ``audit`` the
    apiserver writes every request's metadata (user, verb, object, response code) as JSON lines to
    :attr:`audit_log`."""

    def __init__(self, bin_dir: Path, etcd: Path, *, workdir: Path | None = None, keep: bool = False,
                 apiserver_flags: Iterable[str] = (), ready_timeout: float = 90.0, audit: bool = False) -> None:
        self.bin_dir, self.etcd = Path(bin_dir), Path(etcd)
        self._own_dir = workdir is None
        self.dir = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="gpuconf-k8s-"))
        self.keep = keep
        self.apiserver_flags = list(apiserver_flags)
        self.ready_timeout = ready_timeout
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self.port = 0
        self.url = ""
        self.kubeconfig = self.dir / "admin.kubeconfig"
        self.timings: dict[str, float] = {}
        self.audit_log = self.dir / "logs" / "audit.log" if audit else None

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ, **kwargs: Any) -> RealControlPlane:
        bin_dir, etcd = find_binaries(None, env)
        return cls(bin_dir, etcd, **kwargs)

    def __enter__(self) -> RealControlPlane:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # starting ----------------------------------------------------------------------------------------

    def _launch(self, name: str, argv: list[str]) -> None:
        logs = self.dir / "logs"
        logs.mkdir(exist_ok=True)
        with open(logs / f"{name}.log", "ab") as out:
            self._procs[name] = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                 start_new_session=True, preexec_fn=_die_with_parent)

    def log_tail(self, name: str, lines: int = 15) -> str:
        path = self.dir / "logs" / f"{name}.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def _wait(self, name: str, probe: Any, deadline: float) -> None:
        while True:
            proc = self._procs.get(name)
            if proc is not None and proc.poll() is not None:
                raise RealK8sUnavailable(f"{name} exited with status {proc.returncode}:\n{self.log_tail(name)}")
            with contextlib.suppress(OSError, urllib.error.URLError, ssl.SSLError, ValueError):
                if probe():
                    return
            if time.monotonic() > deadline:
                raise RealK8sUnavailable(f"{name} not ready after {self.ready_timeout:.0f} s:\n"
                                              f"{self.log_tail(name)}")
            time.sleep(0.1)

    def _get(self, url: str, context: ssl.SSLContext | None = None) -> tuple[int, bytes]:
        with urllib.request.urlopen(url, timeout=5, context=context) as r:  # noqa: S310 - our own loopback
            return int(r.status), r.read()

    def start(self) -> None:
        t0 = time.monotonic()
        deadline = t0 + self.ready_timeout
        pki_dir = self.dir / "pki"
        pki_dir.mkdir(parents=True, exist_ok=True)
        pki = _Pki(pki_dir)
        apiserver_crt, apiserver_key = pki.issue(
            "apiserver", "kube-apiserver", server=True, ips=[HOST, "10.0.0.1"],
            dns=["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                 "kubernetes.default.svc.cluster.local"])
        admin = pki.issue("admin", "gpuconf-admin", organization="system:masters")
        kubelet_client = pki.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client",
                                   organization="system:masters")
        sa_key, sa_pub = pki.service_account_keys()

        audit: list[str] = []
        if self.audit_log is not None:
            policy = pki_dir / "audit-policy.yaml"
            policy.write_text(yaml.safe_dump({"apiVersion": "audit.k8s.io/v1", "kind": "Policy",
                                              "omitStages": ["RequestReceived"], "rules": [{"level": "Metadata"}]}))
            self.audit_log.parent.mkdir(exist_ok=True)
            audit = [f"--audit-policy-file={policy}", f"--audit-log-path={self.audit_log}", "--audit-log-format=json",
                     "--audit-log-maxbackup=0"]
        etcd_client, etcd_peer = free_port(), free_port()
        self.port = free_port()
        self.url = f"https://{HOST}:{self.port}"
        etcd_url = f"http://{HOST}:{etcd_client}"
        self._launch("etcd", [
            str(self.etcd), "--name", "gpuconf", "--data-dir", str(self.dir / "etcd"),
            "--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url,
            "--listen-peer-urls", f"http://{HOST}:{etcd_peer}", "--initial-advertise-peer-urls",
            f"http://{HOST}:{etcd_peer}", "--initial-cluster", f"gpuconf=http://{HOST}:{etcd_peer}",
            "--initial-cluster-state", "new", "--log-level", "warn", "--unsafe-no-fsync"])
        self._wait("etcd", lambda: self._get(f"{etcd_url}/health")[0] == 200, deadline)
        self.timings["etcd"] = time.monotonic() - t0

        self._launch("kube-apiserver", [
            str(self.bin_dir / "kube-apiserver"), f"--etcd-servers={etcd_url}",
            f"--bind-address={HOST}", f"--advertise-address={HOST}", f"--secure-port={self.port}",
            f"--tls-cert-file={apiserver_crt}", f"--tls-private-key-file={apiserver_key}",
            f"--client-ca-file={pki.ca_path}",
            f"--kubelet-client-certificate={kubelet_client[0]}", f"--kubelet-client-key={kubelet_client[1]}",
            "--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={sa_pub}", f"--service-account-signing-key-file={sa_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}", "--authorization-mode=Node,RBAC",
            "--allow-privileged=true", "--endpoint-reconciler-type=none", *audit, *self.apiserver_flags])
        ctx = ssl.create_default_context(cafile=str(pki.ca_path))
        ctx.load_cert_chain(str(admin[0]), str(admin[1]))
        self._wait("kube-apiserver", lambda: self._get(f"{self.url}/readyz", ctx)[0] == 200, deadline)
        self.timings["kube-apiserver"] = time.monotonic() - t0

        self.kubeconfig.write_text(yaml.safe_dump(kubeconfig(self.url, pki.ca_path, *admin)))
        components = {"kube-controller-manager": "system:kube-controller-manager",
                      "kube-scheduler": "system:kube-scheduler"}
        health: dict[str, int] = {}
        for name, user in components.items():
            crt, key = pki.issue(name, user)
            path = self.dir / f"{name}.kubeconfig"
            path.write_text(yaml.safe_dump(kubeconfig(self.url, pki.ca_path, crt, key, user=user)))
            health[name] = free_port()
            common = [f"--kubeconfig={path}", f"--authentication-kubeconfig={path}",
                      f"--authorization-kubeconfig={path}", f"--bind-address={HOST}",
                      f"--secure-port={health[name]}", "--leader-elect=false"]
            extra = [f"--service-account-private-key-file={sa_key}", f"--root-ca-file={pki.ca_path}",
                     "--use-service-account-credentials=true",
                     # OpenShift's build adds a controller that puts a ConfigMap in every namespace.
                     "--controllers=*,-service-ca-certificate-publisher-controller"] \
                if name == "kube-controller-manager" else []
            self._launch(name, [str(self.bin_dir / name), *common, *extra])
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE
        for name, port in health.items():
            self._wait(name, lambda p=port: self._get(f"https://{HOST}:{p}/healthz", insecure)[0] == 200, deadline)
        self.timings["components"] = time.monotonic() - t0
        sa = f"{self.url}/api/v1/namespaces/default/serviceaccounts/default"
        self._wait("kube-controller-manager", lambda: self._get(sa, ctx)[0] == 200, deadline)
        self.timings["ready"] = time.monotonic() - t0

    # stopping ----------------------------------------------------------------------------------------

    def stop(self) -> None:
        for name in ("kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"):
            proc = self._procs.pop(name, None)
            if proc is None or proc.poll() is not None:
                continue
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        if self._own_dir and not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def running(self) -> bool:
        return bool(self._procs) and all(p.poll() is None for p in self._procs.values())
