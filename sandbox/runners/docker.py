"""The Docker runner: every candidate inside a locked-down container, one warm container per device.

Container: ``network_mode="none"``, read-only root, tmpfs ``/work`` and ``/tmp``, memory (no swap),
pids and CPU limits, ``no-new-privileges``, every capability dropped but CAP_SETUID/SETGID, which
only the per-job supervisor (root, ``BOOT``) uses to start the job as the unprivileged sandbox
user — so the job has no capabilities and cannot signal its supervisor — and GPUs through
``device_requests``. Every container carries labels (``arbor.sandbox``, campaign, device, owner) so
one left by a crashed Arbor is found and removed when the next runner starts; ``close()`` removes
our own (normal exit and Ctrl-C go through the campaign's ``finally``).

GPU: a ``device: cuda`` runner runs a tiny device job in its warm container before anything
else (``sandbox/gpu/probe.py``); a GPU that does not start there raises ``SandboxError`` naming the
fix (the NVIDIA container toolkit), so a campaign never fails every measurement with a driver error.

Warm reuse: starting a container costs ~0.5-1 s, so one stays up per campaign and device and each
candidate is a fresh ``docker exec`` in a fresh directory. After every job a finisher exec kills
whatever the job left running, returns its files and empties /work and /tmp; if it cannot run (a fork bomb
filled the pids limit) or the job timed out, the container is thrown away and the next job gets
a new one — a poisoned container is never reused.
"""

from __future__ import annotations

import io
import json
import os
import secrets
import socket
import sys
import tarfile
import threading
import time

from docker.utils.socket import frames_iter

from .docker_scripts import BOOT, FINISH, MAX_COLLECT, REAPER, split_status
from ..gpu import device_uuid, require_device
from .images import ImagePlan, ensure_image, resolve_image
from .jobio import TailBuffer, safe_relpath, scrubbed_env
from .proctree import pid_alive
from ..runner import Job, JobResult, Runner, SandboxError

__all__ = ["DockerRunner", "connect", "remove_orphans", "gpu_support", "LABEL"]

LABEL = "arbor.sandbox"


def connect(base_url: str | None = None, timeout: float = 60):  # type: ignore[no-untyped-def]
    """A docker SDK client for ``base_url`` (or $DOCKER_HOST), or a one-line SandboxError."""
    try:
        import docker
    except ImportError:
        raise SandboxError("sandbox.kind docker needs the docker SDK: pip install 'arbor-opt[docker]'") from None
    try:
        client = (docker.DockerClient(base_url=base_url, timeout=timeout) if base_url
                  else docker.from_env(timeout=timeout))
        client.ping()
    except Exception as exc:  # noqa: BLE001 - the SDK raises many types for "no engine"
        where = base_url or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
        raise SandboxError(f"docker: no engine at {where} ({type(exc).__name__}) — start dockerd, or set "
                           "DOCKER_HOST / sandbox.docker.base_url, or use sandbox.kind: local") from None
    return client


def gpu_support(client) -> bool:  # type: ignore[no-untyped-def]
    """Whether *the engine* can honour GPU device_requests, from its own ``docker info``: the
    nvidia runtime registered with dockerd, or NVIDIA devices among the CDI devices it discovered.
    Arbor's PATH and files say nothing about a dockerd that may run elsewhere (DOCKER_HOST)."""
    try:
        info = client.info() or {}
    except Exception:  # noqa: BLE001
        return False
    if "nvidia" in (info.get("Runtimes") or {}):
        return True
    devices = info.get("DiscoveredDevices") or []
    return any(str(d.get("ID", "")).startswith("nvidia.com/gpu") for d in devices if isinstance(d, dict))


def _owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _owner_dead(owner: str) -> bool:
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False  # another machine's container: not ours to judge
    return not pid_alive(int(pid))


def remove_orphans(client, campaign: str | None = None) -> int:  # type: ignore[no-untyped-def]
    """Remove sandbox containers whose owning Arbor process (on this host) is gone."""
    removed = 0
    for c in client.containers.list(all=True, filters={"label": LABEL}):
        labels = c.labels or {}
        if campaign is not None and labels.get("arbor.campaign") != campaign:
            continue
        if _owner_dead(labels.get("arbor.owner", "")):
            try:
                c.remove(force=True)
                removed += 1
            except Exception:  # noqa: BLE001 - already gone
                pass
    return removed


class DockerRunner(Runner):
    """Runs jobs by ``docker exec`` in a warm, locked-down container (see the module docstring)."""

    name = "docker"

    def __init__(self, *, image: str = "host", campaign: str = "adhoc", device: str = "cpu",
                 memory_gb: float | None = 8, cpus: float | None = None, pids_limit: int = 512,
                 tmpfs_mb: int = 2048, warm: bool = True, build: bool = True,
                 base_url: str | None = None, python: str | None = None,
                 user: str | None = None, max_open_files: int = 1024,
                 max_file_bytes: int | None = None, device_check: bool = True) -> None:
        super().__init__()
        self.client = connect(base_url)
        self.campaign, self.device, self.warm = campaign, device, warm
        self.memory_gb, self.cpus, self.pids_limit, self.tmpfs_mb = memory_gb, cpus, pids_limit, tmpfs_mb
        self.max_open_files, self.max_file_bytes = max_open_files, max_file_bytes
        self.plan: ImagePlan = resolve_image(image, python)
        if user:
            self.plan.user = user
        self.orphans_removed = remove_orphans(self.client)
        self.image = ensure_image(self.client, self.plan, build=build)
        self.python = self.plan.python or (self.image.labels or {}).get("arbor.python") or "python3"
        self._container = None
        self.containers_started = 0
        if device.startswith("cuda") and not gpu_support(self.client):
            self.notices.append("docker: no NVIDIA container support found (nvidia-container-toolkit): "
                                "starting a GPU container will fail — install it or use sandbox.kind: local")
        self.device_probe = None  # a tiny device job in the warm container (sandbox.gpu.DeviceProbe)
        if device_check and device.startswith("cuda"):
            # the GPU must start in the container (the NVIDIA container toolkit), or this stops here
            self.device_probe = require_device(self, self.device)

    # ------------------------------------------------------------------ container lifecycle
    def _device_requests(self) -> list:
        if not self.device.startswith("cuda"):
            return []
        import docker.types

        # by UUID: an index would be re-read through whatever CUDA_VISIBLE_DEVICES says
        return [docker.types.DeviceRequest(device_ids=[device_uuid(self.device)], capabilities=[["gpu"]])]

    def _start(self):  # type: ignore[no-untyped-def]
        import docker.errors
        import docker.types

        mounts = [docker.types.Mount(target=dst, source=src, type="bind", read_only=True)
                  for src, dst in self.plan.mounts]
        mem = f"{int(self.memory_gb * 1024)}m" if self.memory_gb else None
        uid = self.plan.user.partition(":")[0]
        name = f"arbor-{self.campaign[:40]}-{self.device.replace(':', '')}-{secrets.token_hex(4)}"
        try:
            c = self.client.containers.run(
                self.image.id, [self.python, "-I", "-S", "-c", REAPER], name=name, detach=True,
                labels={LABEL: "1", "arbor.campaign": self.campaign, "arbor.device": self.device,
                        "arbor.owner": _owner(), "arbor.image": self.plan.ref},
                # root only for PID 1 and the per-job supervisor, with CAP_SETUID/SETGID alone (Docker
                # grants added capabilities only to a root container user); every job runs as plan.user
                user="0:0", network_mode="none", read_only=True,
                tmpfs={"/work": f"rw,exec,nosuid,nodev,size={self.tmpfs_mb}m,mode=1777,uid={uid}",
                       "/tmp": "rw,exec,nosuid,nodev,size=256m,mode=1777"},
                mounts=mounts, mem_limit=mem, memswap_limit=mem, pids_limit=self.pids_limit,
                nano_cpus=int(self.cpus * 1e9) if self.cpus else None, cap_drop=["ALL"],
                cap_add=["SETUID", "SETGID"],  # only for the root supervisor to drop to the job's uid
                security_opt=["no-new-privileges"], device_requests=self._device_requests(),
                ipc_mode="private", working_dir="/work", environment={"HOME": "/work"},
                hostname=socket.gethostname()[:63],  # a random one per container would read as env drift
            )
        except docker.errors.APIError as exc:
            try:  # the engine may have created it before failing to start it (a GPU it cannot give)
                self.client.containers.get(name).remove(force=True)
            except Exception:  # noqa: BLE001 - not created, or already gone
                pass
            raise SandboxError(f"docker: cannot start a sandbox container from {self.plan.ref}: "
                               f"{exc.explanation or exc}") from None
        self.containers_started += 1
        self._container = c
        return c

    def _container_ready(self):  # type: ignore[no-untyped-def]
        if self._container is not None:
            try:
                self._container.reload()
                if self._container.status == "running":
                    return self._container
            except Exception:  # noqa: BLE001 - vanished: start a new one
                pass
            self._discard()
        return self._start()

    def _discard(self) -> None:
        c, self._container = self._container, None
        if c is not None:
            try:
                c.remove(force=True)
            except Exception:  # noqa: BLE001 - already gone
                pass

    def _release(self) -> None:
        self._discard()

    # ------------------------------------------------------------------ exec helpers
    def _boot_argv(self, job: Job, jobdir: str) -> list[str]:
        argv = list(job.argv)
        if argv[0] == sys.executable:  # the harness argv names the host interpreter
            argv[0] = self.python
        limits = {"RLIMIT_NOFILE": self.max_open_files, "RLIMIT_CORE": 0,
                  "RLIMIT_CPU": job.cpu_seconds if job.cpu_seconds is not None
                  else int(job.timeout_s * (os.cpu_count() or 1)) + 10}
        if job.memory_bytes is not None:
            limits["RLIMIT_AS"] = int(job.memory_bytes)
        fsize = [v for v in (job.max_file_bytes, self.max_file_bytes) if v is not None]
        if fsize:
            limits["RLIMIT_FSIZE"] = int(min(fsize))
        uid = self.plan.user.partition(":")[0]
        return [self.python, "-I", "-S", "-c", BOOT, jobdir, uid, json.dumps(limits), str(job.max_output_bytes),
                *argv]

    def _files_tar(self, job: Job) -> bytes:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            dirs: set[str] = set()
            for name, content in job.files.items():
                rel = safe_relpath(name)
                for parent in reversed(rel.parents[:-1]):
                    if str(parent) not in dirs:
                        dirs.add(str(parent))
                        d = tarfile.TarInfo(str(parent))
                        d.type, d.mode = tarfile.DIRTYPE, 0o700
                        tar.addfile(d)
                data = content.encode("utf-8") if isinstance(content, str) else content
                info = tarfile.TarInfo(str(rel))
                info.size, info.mode = len(data), 0o600
                tar.addfile(info, io.BytesIO(data))
        return buf.getvalue()

    def _finish(self, jobdir: str, names: list[str]) -> tuple[dict[str, bytes], int | None]:
        """Kill strays, fetch outputs, wipe the tmpfs: (outputs, strays) or strays None on failure."""
        api = self.client.api
        try:
            ex = api.exec_create(self._container.id, [self.python, "-I", "-S", "-c", FINISH, jobdir,
                                                      json.dumps(names), str(MAX_COLLECT)],
                                 user=self.plan.user, workdir="/work")
            raw_out, raw_err = api.exec_start(ex["Id"], demux=True)
            code = api.exec_inspect(ex["Id"]).get("ExitCode")
        except Exception:  # noqa: BLE001 - e.g. the pids limit is exhausted
            return {}, None
        if code != 0 or not (raw_err or b"").strip().isdigit():
            return {}, None
        outputs: dict[str, bytes] = {}
        with tarfile.open(fileobj=io.BytesIO(raw_out or b"")) as tar:
            for member in tar:
                f = tar.extractfile(member) if member.isfile() else None
                if f is not None and member.name in names:
                    outputs[member.name] = f.read()
        return outputs, int(raw_err.strip())

    # ------------------------------------------------------------------ run
    def _env(self, jobdir: str, job: Job) -> dict[str, str]:
        source = {**os.environ, "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
        env = scrubbed_env(jobdir, job.env, source=source)
        if self.plan.recipe != "host":  # the host image mounts the host's paths where they were
            env.pop("LD_LIBRARY_PATH", None)
        if self.device.startswith("cuda"):
            env.pop("CUDA_VISIBLE_DEVICES", None)  # device_requests already picked the GPU
        return env

    def _oom_since(self, container_id: str, since: float) -> bool | None:
        """Whether the engine reported an OOM kill in this container since ``since`` (a SIGKILL
        alone could also be the job killing its own process group)."""
        try:
            events = self.client.api.events(since=int(since) - 1, until=int(time.time()) + 1, decode=True,
                                            filters={"container": container_id, "event": "oom"})
            return any(True for _ in events)
        except Exception:  # noqa: BLE001
            return None

    def _execute(self, job: Job) -> JobResult:
        container_id = self._container_ready().id
        wall_start = time.time()
        jobdir = f"/work/j{secrets.token_hex(8)}"
        api = self.client.api
        out, err = TailBuffer(job.max_output_bytes), TailBuffer(job.max_output_bytes + 4096)  # + trailer
        start = time.monotonic()
        try:
            ex = api.exec_create(self._container.id, self._boot_argv(job, jobdir), stdin=True,
                                 stdout=True, stderr=True, environment=self._env(jobdir, job),
                                 workdir="/work", user="0:0")  # the supervisor; the job drops to uid
            sock = api.exec_start(ex["Id"], socket=True)
            raw = getattr(sock, "_sock", sock)
            raw.sendall(self._files_tar(job))
            raw.shutdown(socket.SHUT_WR)
        except Exception as exc:  # noqa: BLE001
            self._discard()
            raise SandboxError(f"docker: cannot start the job in the sandbox container: {exc}") from None

        def drain() -> None:
            try:
                for stream_id, data in frames_iter(sock, tty=False):
                    (out if stream_id == 1 else err).write(data)
            except Exception:  # noqa: BLE001 - the stream is cut when we recycle the container
                pass

        reader = threading.Thread(target=drain, daemon=True, name="arbor-docker-drain")
        reader.start()
        timed_out, info = False, {}
        deadline = start + max(job.timeout_s, 0.0)
        try:
            while True:
                # The stream ends when the job exits (the usual case, no polling latency); a
                # stray holding stdout open keeps it alive, so also ask the engine, slowly —
                # every inspect costs CPU the measurement is using.
                reader.join(min(0.25, max(deadline - time.monotonic(), 0.0)))
                info = api.exec_inspect(ex["Id"])
                if not info.get("Running"):
                    break
                if time.monotonic() > deadline:
                    timed_out = True
                    break
                if not reader.is_alive():
                    time.sleep(0.005)
        except BaseException:
            self._discard()  # Ctrl-C mid-job: nothing of this job may keep running
            raise
        duration = time.monotonic() - start
        notes: list[str] = []
        outputs: dict[str, bytes] = {}
        if timed_out:
            self._discard()
        else:
            outputs, strays = self._finish(jobdir, job.collect)
            if strays:
                notes.append(f"killed {strays} process(es) the job left running")
            if strays is None:
                notes.append("sandbox container recycled: it could not be cleaned after the job")
            if strays is None or not self.warm:
                self._discard()
        try:
            sock.close()
        except Exception:  # noqa: BLE001
            pass
        reader.join(5)
        rc, sig = info.get("ExitCode"), None
        status = split_status(err, job.max_output_bytes)
        if timed_out:
            rc, sig = -9, 9
        elif status is not None:
            rc, sig = status.get("rc"), status.get("signal")
            out.total, err.total = int(status.get("out", out.total)), int(status.get("err", err.total))
        elif rc is not None and 128 < rc <= 128 + 64:  # runc reports death by signal N as 128+N
            sig, rc = rc - 128, -(rc - 128)
        oom = self._oom_since(container_id, wall_start) if sig == 9 and not timed_out else None
        if oom:
            notes.append("killed by the kernel OOM killer (container memory limit)")
        for label, buf in (("stdout", out), ("stderr", err)):
            if buf.total > job.max_output_bytes:
                notes.append(f"{label}: {buf.total} bytes written, last {job.max_output_bytes} kept")
        return JobResult(returncode=rc, timed_out=timed_out, duration_s=duration, stdout_tail=out.text(),
                         stderr_tail=err.text(), outputs=outputs, signal=sig, notes=notes,
                         stdout_bytes=out.total, stderr_bytes=err.total, oom_killed=oom)
