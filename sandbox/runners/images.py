"""Sandbox images: which image a campaign measures in, what it mounts, and how to build it.

Three recipes live in ``sandbox/dockerfiles/``:

* ``host`` — ``FROM scratch`` plus a generated skeleton root (users, /work, /tmp). It borrows the
  host's interpreter through read-only bind mounts of ``/usr`` and the Python prefix, so it builds
  in a second with no registry and measures with exactly the torch the host has. The default.
* ``cpu`` / ``cuda`` — self-contained images (Python, torch, triton) for machines with a registry.

Any other name is taken as an image reference that must already exist locally (``docker load``).
A recipe image's tag carries a hash of its recipe, so an edited recipe is rebuilt, never reused.
"""

from __future__ import annotations

import hashlib
import io
import os
import sys
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from ..runner import SandboxError

__all__ = ["ImagePlan", "resolve_image", "ensure_image", "image_status", "RECIPES", "SANDBOX_UID",
           "DOCKERFILES"]

DOCKERFILES = Path(__file__).parents[1] / "dockerfiles"
RECIPES = ("host", "cpu", "cuda")
SANDBOX_UID = 10001
_REPO = "arbor-sandbox"
_PASSWD = ("root:x:0:0:root:/root:/usr/sbin/nologin\n"
           f"arbor:x:{SANDBOX_UID}:{SANDBOX_UID}:arbor sandbox:/work:/usr/sbin/nologin\n"
           "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
_GROUP = f"root:x:0:\narbor:x:{SANDBOX_UID}:\nnogroup:x:65534:\n"


@dataclass
class ImagePlan:
    """Everything the runner needs to know about an image before it starts a container."""

    ref: str  # the local tag to run
    recipe: str | None  # host | cpu | cuda, or None for a user-supplied image
    python: str | None  # interpreter inside; None: read the image's arbor.python label
    mounts: list[tuple[str, str]] = field(default_factory=list)  # (host path, container path), ro
    user: str = f"{SANDBOX_UID}:{SANDBOX_UID}"


def _host_links() -> dict[str, str]:
    """Merged-/usr hosts (Debian >= 12, Fedora, Arch) have /bin -> usr/bin: mirror the links."""
    return {name: os.readlink(f"/{name}") for name in ("bin", "sbin", "lib", "lib64", "lib32")
            if os.path.islink(f"/{name}")}


def host_mounts() -> list[tuple[str, str]]:
    """Read-only bind mounts that give the scratch image a working interpreter (same paths)."""
    mounts = [("/usr", "/usr")]
    mounts += [(f"/{n}", f"/{n}") for n in ("lib", "lib64", "lib32")
               if os.path.isdir(f"/{n}") and not os.path.islink(f"/{n}")]
    # /etc/ld.so.cache is *copied* into the image (see _host_context), never bind-mounted: the
    # NVIDIA container hook runs ldconfig inside the container to register the driver's
    # libraries, and ldconfig fails on a read-only bind mount of the cache.
    if os.path.isfile("/etc/localtime"):
        mounts.append(("/etc/localtime", "/etc/localtime"))
    prefixes = {os.path.realpath(p) for p in (sys.base_prefix, sys.prefix, sys.exec_prefix)}
    prefixes.add(os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))))
    for p in sorted(prefixes):
        if not any(p == m or p.startswith(m.rstrip("/") + "/") for m, _ in mounts):
            mounts.append((p, p))
    for p in (sys.prefix, sys.base_prefix):  # a venv reached through a symlinked path
        if os.path.realpath(p) != p and os.path.isdir(p):
            mounts.append((os.path.realpath(p), p))
    return mounts


def _host_context() -> bytes:
    """The build context for Dockerfile.host: the Dockerfile plus a skeleton ``rootfs/``."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        def add(name: str, data: bytes | None = None, mode: int = 0o644, link: str | None = None,
                uid: int = 0) -> None:
            info = tarfile.TarInfo(name)
            info.mtime, info.uid, info.gid = 0, uid, uid
            if link is not None:
                info.type, info.linkname, info.mode = tarfile.SYMTYPE, link, 0o777
                tar.addfile(info)
            elif data is None:
                info.type, info.mode = tarfile.DIRTYPE, mode
                tar.addfile(info)
            else:
                info.size, info.mode = len(data), mode
                tar.addfile(info, io.BytesIO(data))

        add("Dockerfile", (DOCKERFILES / "Dockerfile.host").read_bytes())
        add("rootfs", mode=0o755)
        for d in ("etc", "usr", "root", "proc", "sys", "dev"):
            add(f"rootfs/{d}", mode=0o755)
        add("rootfs/tmp", mode=0o1777)
        add("rootfs/work", mode=0o755, uid=SANDBOX_UID)
        add("rootfs/etc/passwd", _PASSWD.encode())
        add("rootfs/etc/group", _GROUP.encode())
        add("rootfs/etc/nsswitch.conf", b"passwd: files\ngroup: files\nhosts: files\n")
        add("rootfs/etc/hosts", b"127.0.0.1 localhost\n")
        for name, target in sorted(_host_links().items()):
            add(f"rootfs/{name}", link=target)
        add("rootfs/etc/ld.so.conf.d", mode=0o755)
        for name, data in sorted(_ld_files().items()):
            add(f"rootfs{name}", data)
    return buf.getvalue()


def _ld_files() -> dict[str, bytes]:
    """The host's loader cache and its configuration, copied so the mounted /usr resolves the same
    libraries inside, and so ldconfig (the NVIDIA hook's) can rewrite the cache in the container."""
    files: dict[str, bytes] = {}
    names = ["/etc/ld.so.cache", "/etc/ld.so.conf"]
    if os.path.isdir("/etc/ld.so.conf.d"):
        names += [f"/etc/ld.so.conf.d/{n}" for n in sorted(os.listdir("/etc/ld.so.conf.d")) if n.endswith(".conf")]
    for name in names:
        try:
            with open(name, "rb") as f:
                files[name] = f.read()
        except OSError:
            pass
    return files


def _recipe_hash(recipe: str) -> str:
    h = hashlib.sha256()
    h.update((DOCKERFILES / f"Dockerfile.{recipe}").read_bytes())
    if recipe == "host":
        h.update(_host_context())
    return h.hexdigest()[:12]


def resolve_image(name: str, python: str | None = None) -> ImagePlan:
    """Turn ``sandbox.docker.image`` into a plan: a recipe name, or any local image reference."""
    if name == "host":
        return ImagePlan(f"{_REPO}:host-{_recipe_hash('host')}", "host", python or sys.executable,
                         host_mounts())
    if name in ("cpu", "cuda"):
        return ImagePlan(f"{_REPO}:{name}-{_recipe_hash(name)}", name, python)
    return ImagePlan(name, None, python, user=f"{SANDBOX_UID}:{SANDBOX_UID}")


def image_status(client, plan: ImagePlan) -> tuple[bool, str]:  # type: ignore[no-untyped-def]
    """(present, one-line description) without building anything."""
    import docker.errors

    try:
        img = client.images.get(plan.ref)
    except docker.errors.ImageNotFound:
        how = ("built automatically on first use" if plan.recipe == "host" else
               f"build it: docker build -f {DOCKERFILES}/Dockerfile.{plan.recipe} -t {plan.ref} {DOCKERFILES}"
               if plan.recipe else "load or pull it first (docker load -i IMAGE.tar)")
        return False, f"image {plan.ref} not present — {how}"
    except docker.errors.APIError as exc:
        return False, f"cannot inspect image {plan.ref}: {exc.explanation or exc}"
    return True, f"image {plan.ref} ({img.short_id})"


def ensure_image(client, plan: ImagePlan, build: bool = True):  # type: ignore[no-untyped-def]
    """The image object for ``plan``, building a recipe image if it is missing (and allowed)."""
    import docker.errors

    try:
        return client.images.get(plan.ref)
    except docker.errors.ImageNotFound:
        pass
    except docker.errors.APIError as exc:
        raise SandboxError(f"docker: cannot inspect image {plan.ref}: {exc.explanation or exc}") from None
    if plan.recipe is None or not build:
        present, why = image_status(client, plan)
        raise SandboxError(f"sandbox.docker.image: {why}")
    try:
        if plan.recipe == "host":
            image, _logs = client.images.build(fileobj=io.BytesIO(_host_context()), custom_context=True,
                                               tag=plan.ref, rm=True, forcerm=True, pull=False)
        else:
            image, _logs = client.images.build(path=str(DOCKERFILES), dockerfile=f"Dockerfile.{plan.recipe}",
                                               tag=plan.ref, rm=True, forcerm=True)
    except docker.errors.BuildError as exc:
        last = str(exc.msg or exc).strip().splitlines()[-1:] or ["build failed"]
        raise SandboxError(f"sandbox.docker.image: building {plan.ref} from Dockerfile.{plan.recipe} "
                           f"failed: {last[0]} — build it by hand (docker build -f "
                           f"{DOCKERFILES}/Dockerfile.{plan.recipe} {DOCKERFILES}) or use image: host") from None
    except docker.errors.APIError as exc:
        raise SandboxError(f"docker: building {plan.ref} failed: {exc.explanation or exc}") from None
    return image
