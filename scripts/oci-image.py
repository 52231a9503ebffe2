#!/usr/bin/env python3
"""Writes strait's container image as an OCI image layout in a tar (scripts/image runs it).

One layer, built from nothing: the binary, exactly the shared libraries it and the GSS-API library
it loads at run time need (this machine's files, each checked against its Debian package's md5sums
and the package recorded in /var/lib/dpkg/status.d/ and a label), Debian's CA certificates, a
non-root user (65532, as distroless images have), /tmp. The configuration (user, entrypoint,
command, ports, environment) is read from deploy/Dockerfile's last stage, so the image built here
and the one Docker builds from that file start the same way.

Deterministic: entries in name order, every mtime the commit's time, owners root except the user's
home, gzip without a name or time. The same inputs give the same digest.

The archive is an OCI image layout (oci-layout, index.json, blobs/sha256/...) and also carries a
manifest.json of the Docker archive format, so `docker load`, `crane push FILE` and
`skopeo copy oci-archive:FILE` all read it.
"""

import argparse
import gzip
import hashlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
import tarfile
import tempfile
import time

USER = 65532
HOME = "home/nonroot"
BINARY = "usr/bin/strait"
GSSAPI = "libgssapi_krb5.so.2"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"


def fail(message):
    print(f"oci-image: {message}", file=sys.stderr)
    sys.exit(1)


def run(*argv):
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def md5_file(path):
    h = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# --- what the binary needs ---------------------------------------------------------------------


def ldd(path):
    """Absolute paths of the shared objects `path` needs, the program interpreter included."""
    found = []
    for line in run("ldd", path).splitlines():
        m = re.search(r"(?:=>\s*)?(/\S+)\s+\(0x", line)
        if m:
            found.append(m.group(1))
        elif "not found" in line:
            fail(f"{path}: {line.strip()}")
    return found


def gssapi_library(libc):
    """This machine's libgssapi_krb5.so.2, which strait loads (dlopen) for SASL/GSSAPI: the one
    beside the binary's libc (another architecture's may be installed too)."""
    found = []
    for line in run("ldconfig", "-p").splitlines():
        parts = line.strip().split(" => ")
        if len(parts) == 2 and parts[0].split()[0] == GSSAPI:
            found.append(parts[1])
    for path in found:
        if os.path.dirname(path) == os.path.dirname(libc):
            return path
    fail(f"{GSSAPI} is not installed (Debian: apt-get install libgssapi-krb5-2): "
         "the image carries it for SASL/GSSAPI")


class Packages:
    """Debian's record of which package owns a file, and that file's md5 in the package."""

    def __init__(self):
        self.versions = {}

    def owner(self, path):
        # dpkg knows a file by the path its package ships, which merged /usr may have moved.
        real = os.path.realpath(path)
        candidates = [path, real]
        if real.startswith("/usr/"):
            candidates.append(real[len("/usr"):])
        for candidate in candidates:
            out = subprocess.run(["dpkg-query", "-S", candidate], capture_output=True, text=True)
            if out.returncode == 0:
                package = out.stdout.split(":")[0].split(",")[0].strip()
                # dpkg-query -S prints "pkg:arch: path"; keep the arch-qualified name.
                qualified = out.stdout.split(": ")[0].split(",")[0].strip()
                return package, qualified
        fail(f"{path}: no Debian package owns it (the image takes only files from packages)")

    def verify(self, qualified, path):
        """The file's bytes are the package's: its md5 matches the package's md5sums."""
        real = os.path.realpath(path)
        sums = run("dpkg-query", "--control-show", qualified, "md5sums")
        for line in sums.splitlines():
            digest, name = line.split(maxsplit=1)
            if os.path.realpath("/" + name) == real:
                if md5_file(real) != digest:
                    fail(f"{path} differs from the copy in the package {qualified} (dpkg --verify {qualified})")
                return
        fail(f"{path}: not in the md5sums of {qualified}")

    def record(self, package, qualified):
        if package not in self.versions:
            version = run("dpkg-query", "-W", "-f=${Version}", qualified)
            self.versions[package] = (qualified, version)

    def status(self, qualified):
        """The package's dpkg status stanza, as distroless images keep it for scanners."""
        return run("dpkg-query", "-s", qualified).encode()

    def copyright(self, package, qualified):
        path = f"/usr/share/doc/{package}/copyright"
        if os.path.exists(path):
            return path
        fail(f"{path} is missing (package {qualified})")


def image_path(host_path):
    """Where a host library goes: under usr/, as Debian's merged /usr has it (/lib -> usr/lib)."""
    path = host_path[len("/usr"):] if host_path.startswith("/usr/") else host_path
    return "usr" + path


def ca_bundle():
    """Debian's CA certificates (the ca-certificates package's own, never this machine's local
    additions), concatenated as update-ca-certificates does."""
    names = sorted(
        line for line in run("dpkg-query", "-L", "ca-certificates").splitlines()
        if line.startswith("/usr/share/ca-certificates/") and line.endswith(".crt")
    )
    if not names:
        fail("no certificates in the ca-certificates package (Debian: apt-get install ca-certificates)")
    bundle = b""
    for name in names:
        with open(name, "rb") as f:
            data = f.read()
        bundle += data if data.endswith(b"\n") else data + b"\n"
    return bundle


# --- the Dockerfile's runtime settings -----------------------------------------------------------


def dockerfile_config(path):
    """User, entrypoint, command, ports, environment, working directory and stop signal of the
    Dockerfile's last stage (exec-form JSON arrays and KEY=VALUE pairs only)."""
    with open(path) as f:
        text = re.sub(r"\\\n", " ", f.read())
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    last = max(i for i, line in enumerate(lines) if line.upper().startswith("FROM "))
    config = {"Env": [], "ExposedPorts": {}}
    for line in lines[last + 1:]:
        word, _, rest = line.partition(" ")
        word, rest = word.upper(), rest.strip()
        if word == "USER":
            config["User"] = rest
        elif word in ("ENTRYPOINT", "CMD"):
            try:
                value = json.loads(rest)
            except json.JSONDecodeError:
                fail(f"{path}: {word} must be a JSON array (exec form): {rest}")
            config["Entrypoint" if word == "ENTRYPOINT" else "Cmd"] = value
        elif word == "EXPOSE":
            for port in rest.split():
                config["ExposedPorts"][port if "/" in port else port + "/tcp"] = {}
        elif word == "ENV":
            for pair in shlex.split(rest):
                if "=" not in pair:
                    fail(f"{path}: ENV takes KEY=VALUE pairs: {rest}")
                config["Env"].append(pair)
        elif word == "WORKDIR":
            config["WorkingDir"] = rest
        elif word == "STOPSIGNAL":
            config["StopSignal"] = rest
    for key in ("User", "Entrypoint"):
        if key not in config:
            fail(f"{path}: the last stage has no {key.upper()}")
    return config


# --- the layer ------------------------------------------------------------------------------------


class Layer:
    """Tar entries by path, written sorted with fixed times and owners."""

    def __init__(self, mtime):
        self.mtime = mtime
        self.entries = {}

    def _parents(self, path):
        parts = path.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            self.dir("/".join(parts[:i]))

    def dir(self, path, mode=0o755, owner=0):
        if path not in self.entries:
            self._parents(path)
            self.entries[path] = ("dir", mode, owner, None)

    def file(self, path, data=None, source=None, mode=0o644):
        self._parents(path)
        self.entries[path] = ("file", mode, 0, source if source is not None else data)

    def link(self, path, target):
        self._parents(path)
        self.entries[path] = ("link", 0o777, 0, target)

    def write(self, fileobj):
        with tarfile.open(fileobj=fileobj, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for path in sorted(self.entries):
                kind, mode, owner, payload = self.entries[path]
                info = tarfile.TarInfo(path)
                info.mtime, info.mode, info.uid, info.gid = self.mtime, mode, owner, owner
                info.uname = info.gname = ""
                if kind == "dir":
                    info.type = tarfile.DIRTYPE
                    tar.addfile(info)
                elif kind == "link":
                    info.type, info.linkname = tarfile.SYMTYPE, payload
                    tar.addfile(info)
                elif isinstance(payload, bytes):
                    info.size = len(payload)
                    tar.addfile(info, io.BytesIO(payload))
                else:
                    info.size = os.path.getsize(payload)
                    with open(payload, "rb") as f:
                        tar.addfile(info, f)


def rootfs(binary, mtime):
    layer = Layer(mtime)
    packages = Packages()

    layer.file(BINARY, source=binary, mode=0o755)
    libraries = ldd(binary)
    libc = next((path for path in libraries if os.path.basename(path) == "libc.so.6"), None)
    if libc is None:
        fail(f"{binary} does not link libc.so.6 (a static binary? the image expects glibc's)")
    gssapi = gssapi_library(libc)
    libraries += [gssapi] + ldd(gssapi)
    for host in dict.fromkeys(libraries):
        package, qualified = packages.owner(host)
        packages.verify(qualified, host)
        packages.record(package, qualified)
        layer.file(image_path(host), source=os.path.realpath(host), mode=0o755)
    # /lib and /lib64 lead into usr/, as on Debian with merged /usr: the binary's interpreter
    # (/lib64/ld-linux-x86-64.so.2) is found through them.
    layer.link("lib", "usr/lib")
    if any(path.startswith("usr/lib64/") for path in layer.entries):
        layer.link("lib64", "usr/lib64")

    packages.record("ca-certificates", "ca-certificates")
    layer.file("etc/ssl/certs/ca-certificates.crt", ca_bundle())

    for package, (qualified, _) in sorted(packages.versions.items()):
        layer.file(f"var/lib/dpkg/status.d/{package}", packages.status(qualified))
        layer.file(f"usr/share/doc/{package}/copyright", source=packages.copyright(package, qualified))

    layer.file("etc/passwd", (
        "root:x:0:0:root:/root:/sbin/nologin\n"
        f"nonroot:x:{USER}:{USER}:nonroot:/{HOME}:/sbin/nologin\n").encode())
    layer.file("etc/group", f"root:x:0:\nnonroot:x:{USER}:\n".encode())
    # Host names from /etc/hosts, then DNS (glibc's own default order, said outright).
    layer.file("etc/nsswitch.conf", b"passwd: files\ngroup: files\nhosts: files dns\n")
    layer.dir(HOME, mode=0o700, owner=USER)
    layer.dir("tmp", mode=0o1777)
    return layer, packages


# --- the archive ----------------------------------------------------------------------------------


class Archive:
    """Blobs by digest, then the layout's files, into one deterministic tar."""

    def __init__(self, mtime):
        self.mtime = mtime
        self.blobs = {}  # digest -> path of the bytes on disk
        self.tmp = tempfile.TemporaryDirectory(prefix="oci-image.")

    def add(self, data, media_type, annotations=None):
        digest = hashlib.sha256(data).hexdigest()
        path = os.path.join(self.tmp.name, digest)
        with open(path, "wb") as f:
            f.write(data)
        self.blobs[digest] = path
        return self.descriptor(media_type, digest, len(data), annotations)

    def add_file(self, path, media_type):
        digest = sha256_file(path)
        self.blobs[digest] = path
        return self.descriptor(media_type, digest, os.path.getsize(path))

    @staticmethod
    def descriptor(media_type, digest, size, annotations=None):
        d = {"mediaType": media_type, "digest": f"sha256:{digest}", "size": size}
        if annotations:
            d["annotations"] = annotations
        return d

    def write(self, out, files):
        def info(name, size=0, kind=tarfile.REGTYPE, mode=0o644):
            i = tarfile.TarInfo(name)
            i.mtime, i.mode, i.type, i.size = self.mtime, mode, kind, size
            return i

        partial = out + ".partial"
        with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as tar:
            tar.addfile(info("blobs", kind=tarfile.DIRTYPE, mode=0o755))
            tar.addfile(info("blobs/sha256", kind=tarfile.DIRTYPE, mode=0o755))
            for digest in sorted(self.blobs):
                with open(self.blobs[digest], "rb") as f:
                    tar.addfile(info(f"blobs/sha256/{digest}", os.path.getsize(self.blobs[digest])), f)
            for name in sorted(files):
                data = files[name]
                tar.addfile(info(name, len(data)), io.BytesIO(data))
        os.replace(partial, out)


def canonical(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def build(args):
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(args.created))
    config = dockerfile_config(args.dockerfile)
    layer, packages = rootfs(args.binary, args.created)
    archive = Archive(args.created)

    # The layer: its tar's digest is the config's diff_id, its gzip's the manifest's.
    raw = os.path.join(archive.tmp.name, "layer.tar")
    with open(raw, "wb") as f:
        layer.write(f)
    packed = os.path.join(archive.tmp.name, "layer.tar.gz")
    with open(raw, "rb") as src, open(packed, "wb") as dst:
        with gzip.GzipFile(filename="", mode="wb", fileobj=dst, mtime=0, compresslevel=args.level) as gz:
            for chunk in iter(lambda: src.read(1 << 20), b""):
                gz.write(chunk)
    diff_id = sha256_file(raw)
    os.remove(raw)
    layer_descriptor = archive.add_file(packed, OCI_LAYER)

    labels = dict(label.split("=", 1) for label in args.label)
    labels["org.opencontainers.image.created"] = created
    labels["dev.strait.image.debian-packages"] = " ".join(
        f"{name}={version}" for name, (_, version) in sorted(packages.versions.items()))
    config["Labels"] = labels
    image_config = {
        "created": created,
        "architecture": args.arch,
        "os": "linux",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff_id}"]},
        "history": [{"created": created, "created_by": "scripts/image (scripts/oci-image.py)"}],
    }
    config_descriptor = archive.add(canonical(image_config), OCI_CONFIG)
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": config_descriptor,
        "layers": [layer_descriptor],
        "annotations": {k: v for k, v in labels.items() if k.startswith("org.opencontainers.image.")},
    }
    manifest_descriptor = archive.add(canonical(manifest), OCI_MANIFEST, {
        "org.opencontainers.image.ref.name": args.tag,
    })
    index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
             "manifests": [manifest_descriptor]}
    docker = [{"Config": f"blobs/sha256/{config_descriptor['digest'][7:]}",
               "RepoTags": [f"{args.name}:{args.tag}"],
               "Layers": [f"blobs/sha256/{layer_descriptor['digest'][7:]}"]}]
    archive.write(args.out, {
        "oci-layout": canonical({"imageLayoutVersion": "1.0.0"}),
        "index.json": canonical(index),
        "manifest.json": canonical(docker),
    })
    print(f"oci-image: {args.out}: manifest {manifest_descriptor['digest']}, layer "
          f"{layer_descriptor['size']:,} bytes; from Debian: {labels['dev.strait.image.debian-packages']}",
          file=sys.stderr)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--binary", required=True)
    p.add_argument("--dockerfile", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--name", default="strait", help="the image's name in manifest.json (docker load)")
    p.add_argument("--tag", required=True)
    p.add_argument("--created", type=int, required=True, help="seconds since the epoch: every time in the image")
    p.add_argument("--arch", required=True, help="OCI architecture (amd64, arm64)")
    p.add_argument("--label", action="append", default=[], help="KEY=VALUE, repeated")
    p.add_argument("--level", type=int, default=9, help="gzip level of the layer")
    build(p.parse_args())


if __name__ == "__main__":
    main()
