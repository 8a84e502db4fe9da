"""A real one-node Slurm cluster on this machine, for the tests of `attnbench slurm`.

Everything lives in one temporary folder: a munge key and munged on its own socket, a slurm.conf
of our own (SLURM_CONF points the clients at it), slurmctld and slurmd on free ports, their state,
spool, logs and pid files. Nothing touches /etc or a system munged. `stop()` ends the daemons by
their pid files, so a failed test leaves nothing running.

Debian 12's slurm-wlm (22.05) and munge are what this was checked with; scripts/setup.sh installs
them; `why_missing()` says what is missing and the command that installs it (a test never
installs anything itself).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "sinfo")


def missing_programs() -> list[str]:
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    return [p for p in PROGRAMS if shutil.which(p, path=path) is None]


def why_missing() -> str | None:
    """Why the daemons and clients cannot be run here (what is missing, and the command that
    installs it), or None when they are all there."""
    missing = missing_programs()
    if not missing:
        return None
    return (f"{', '.join(missing)} not installed: `bash scripts/setup.sh` installs them "
            f"(apt-get install slurm-wlm munge)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class OneNodeSlurm:
    def __init__(self):
        # munged wants every folder above its socket searchable by all: not pytest's 0700 tmp_path.
        self.root = Path(tempfile.mkdtemp(prefix="attnbench-slurm-"))
        self.root.chmod(0o755)
        self.host = socket.gethostname().split(".")[0]
        self.conf = self.root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf),
                    "PATH": os.environ.get("PATH", "") + ":/usr/sbin:/sbin"}

    def pid_file(self, daemon: str) -> Path:
        return self.root / f"{daemon}.pid"

    def run(self, *command, check=True, **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run([str(c) for c in command], env=self.env, capture_output=True, text=True,
                              check=check, timeout=60, **kwargs)

    def start(self) -> None:
        for folder in ("state", "spool"):
            (self.root / folder).mkdir()
        key = self.root / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        socket_path = self.root / "munge.socket"
        self.run("munged", f"--key-file={key}", f"--socket={socket_path}",
                 f"--pid-file={self.pid_file('munged')}", f"--log-file={self.root / 'munged.log'}",
                 f"--seed-file={self.root / 'munged.seed'}")
        self.conf.write_text(f"""\
ClusterName=attnbenchtest
SlurmctldHost={self.host}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={socket_path}
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
StateSaveLocation={self.root / 'state'}
SlurmdSpoolDir={self.root / 'spool'}
SlurmctldPidFile={self.pid_file('slurmctld')}
SlurmdPidFile={self.pid_file('slurmd')}
SlurmctldLogFile={self.root / 'slurmctld.log'}
SlurmdLogFile={self.root / 'slurmd.log'}
NodeName={self.host} NodeAddr=127.0.0.1 CPUs={os.cpu_count()} State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")
        self.run("slurmctld", "-c")  # -c: a clean start, whatever the state folder holds
        self.run("slurmd")
        deadline = time.time() + 60
        while time.time() < deadline:
            state = self.run("sinfo", "-h", "-o", "%T", check=False).stdout.strip()
            if state == "idle":
                return
            time.sleep(0.5)
        raise RuntimeError(f"the one-node Slurm did not come up (node state {state!r}); "
                           f"logs in {self.root}:\n{self.logs()}")

    def logs(self) -> str:
        text = ""
        for log in ("slurmctld.log", "slurmd.log", "munged.log"):
            path = self.root / log
            if path.exists():
                text += f"--- {log}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-20:]) + "\n"
        return text

    def queued(self, job_id: str) -> list[str]:
        """The job's (or array's) tasks Slurm still lists, pending or running, as 'id state'."""
        result = self.run("squeue", "-h", "-o", "%i %T", "-j", job_id, check=False)
        return result.stdout.split("\n") if result.returncode == 0 and result.stdout.strip() else []

    def wait_until_done(self, job_id: str, timeout: float = 240) -> None:
        deadline = time.time() + timeout
        while self.queued(job_id):
            if time.time() > deadline:
                raise TimeoutError(f"job {job_id} still queued after {timeout} s: {self.queued(job_id)}")
            time.sleep(0.5)

    def stop(self) -> None:
        self.run("scancel", "--user", str(os.getuid()), check=False)
        for daemon in reversed(DAEMONS):
            pid_file = self.pid_file(daemon)
            try:
                pid = int(pid_file.read_text().strip())
            except (OSError, ValueError):
                continue
            try:
                os.kill(pid, signal.SIGTERM)
                deadline = time.time() + 10
                while time.time() < deadline:
                    os.kill(pid, 0)
                    time.sleep(0.1)
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.root, ignore_errors=True)
