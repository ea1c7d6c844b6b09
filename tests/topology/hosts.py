"""Hosts for the topology test: each a network namespace of its own on this machine.

``Network.add`` makes a namespace joined to the machine by a veth pair (a /30 of
10.213.0.0/16: the machine's end ``.1``, the host's ``.2``), with its own working
directory. A relay on the machine's end of every pair forwards the shared services
(PostgreSQL, Redis, the S3 server), which listen on 127.0.0.1 only, so a host reaches
them through its network as it would reach servers on a LAN. Traffic never leaves the
machine: only loopback and the namespaces' own addresses are used.
"""

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

RELAY = Path(__file__).with_name("relay.py")


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def namespaces_available() -> str:
    """Why namespaces cannot be made here, or "" when they can."""
    if os.geteuid() != 0:
        return "makes network namespaces: needs root"
    if shutil.which("ip") is None:
        return "makes network namespaces: needs iproute2's `ip`"
    return ""


@dataclass
class Host:
    name: str
    namespace: str
    gateway: str  # the machine's end of the veth pair, where the relay listens
    address: str  # the host's own address inside its namespace
    directory: Path
    processes: list[subprocess.Popen] = field(default_factory=list)


class Network:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.tag = f"{os.getpid() % 100000}"
        self.block = (os.getpid() % 50) * 5
        self.hosts: list[Host] = []
        self.relay: subprocess.Popen | None = None

    def add(self, name: str) -> Host:
        index = len(self.hosts)
        namespace = f"c21-{self.tag}-{index}"
        outside, inside = f"c21o{self.tag}{index}", f"c21i{self.tag}{index}"
        octet = self.block + index
        gateway, address = f"10.213.{octet}.1", f"10.213.{octet}.2"
        _ip("netns", "del", namespace, check=False)
        _ip("link", "del", outside, check=False)
        _ip("netns", "add", namespace)
        _ip("link", "add", outside, "type", "veth", "peer", "name", inside)
        _ip("link", "set", inside, "netns", namespace)
        _ip("addr", "add", f"{gateway}/30", "dev", outside)
        _ip("link", "set", outside, "up")
        _ip("-n", namespace, "addr", "add", f"{address}/30", "dev", inside)
        _ip("-n", namespace, "link", "set", inside, "up")
        _ip("-n", namespace, "link", "set", "lo", "up")
        directory = self.directory / name
        (directory / "media").mkdir(parents=True)
        host = Host(name, namespace, gateway, address, directory)
        self.hosts.append(host)
        return host

    def relay_services(self, ports: list[int]) -> None:
        """Forward ``gateway:port`` of every host to ``127.0.0.1:port`` of the machine."""
        routes = [f"{h.gateway}:{p}=127.0.0.1:{p}" for h in self.hosts for p in ports]
        self.relay = subprocess.Popen(
            [sys.executable, str(RELAY), *routes], stdout=subprocess.PIPE, text=True
        )
        assert self.relay.stdout is not None
        assert self.relay.stdout.readline().strip() == "ready"

    def start(self, host: Host, argv: list[str], env: dict[str, str]) -> subprocess.Popen:
        log = open(host.directory / f"{len(host.processes)}.log", "w")  # noqa: SIM115
        process = subprocess.Popen(
            ["ip", "netns", "exec", host.namespace, *argv],
            cwd=host.directory,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        host.processes.append(process)
        return process

    def log(self, host: Host) -> str:
        return "\n".join(p.read_text()[-3000:] for p in sorted(host.directory.glob("*.log")))

    def kill(self, host: Host) -> None:
        """The host dies: every process in its namespace gets SIGKILL at once."""
        pids = _ip("netns", "pids", host.namespace, check=False).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        for process in host.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()

    def close(self) -> None:
        for host in self.hosts:
            for process in host.processes:
                if process.poll() is None:
                    process.terminate()
        deadline = time.monotonic() + 15
        for host in self.hosts:
            for process in host.processes:
                try:
                    process.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
            self.kill(host)
            _ip("netns", "del", host.namespace, check=False)
            _ip("link", "del", f"c21o{self.tag}{self.hosts.index(host)}", check=False)
        if self.relay is not None:
            self.relay.terminate()
            self.relay.wait(timeout=10)
