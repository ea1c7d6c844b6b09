"""``contextops mcp`` in MCP hosts nobody here wrote: Claude Code's CLI (``claude mcp add``
with the README's own commands, then ``claude mcp list``) and the MCP Inspector's CLI
(``tools/list``, ``tools/call``, ``resources/read``, ``prompts/list``, ``prompts/get``).

Both come from npm, pinned in tests/npm/package.json with its lock file and installed
into tests/npm/node_modules with ``npm install`` (``.ci/run`` does it first; a developer's first run does it
here). Each host runs with ``HOME`` in a temporary folder, so nothing touches the real
one. Without npm the tests skip, which ``CONTEXTOPS_NO_SKIPS=1`` turns into a failure."""

import fcntl
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.client.test_cli import script
from tests.client.test_mcp import http_server  # noqa: F401 (a fixture)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.xdist_group("live")]

ROOT = Path(__file__).resolve().parents[2]
NPM_DIR = ROOT / "tests" / "npm"
NPM_BIN = NPM_DIR / "node_modules" / ".bin"
README = ROOT / "README.md"


def _installed() -> bool:
    return (NPM_BIN / "claude").exists() and (NPM_BIN / "mcp-inspector").exists()


def npm_hosts() -> Path:
    """The folder of the hosts' executables, installed from the lock file when missing
    (one test process at a time)."""
    if not _installed():
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip("needs npm (Node.js) to install Claude Code and the MCP Inspector")
        with open(NPM_DIR / "package.json") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not _installed():
                done = subprocess.run(
                    # as .ci/run: install keeps to the lock file (ci refuses it, see there)
                    [npm, "install", "--prefix", str(NPM_DIR), "--no-audit", "--no-fund"],
                    capture_output=True,
                    text=True,
                    timeout=900,
                )
                assert done.returncode == 0, done.stdout + done.stderr
    return NPM_BIN


@pytest.fixture
def hosts(tmp_path) -> dict[str, str]:
    """The environment a host runs in: a temporary HOME, ``contextops`` and the hosts on
    PATH."""
    bin_dir = npm_hosts()
    home = tmp_path / "home"
    home.mkdir()
    return {
        "PATH": os.pathsep.join([str(Path(script()).parent), str(bin_dir), os.environ["PATH"]]),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "NO_COLOR": "1",
    }


def readme_command(prefix: str) -> str:
    """The README's shell command that starts with ``prefix`` (with its continuation
    lines), as a person would copy it."""
    lines = README.read_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith(prefix):
            command = [line]
            while command[-1].split("#")[0].rstrip().endswith("\\"):
                i += 1
                command.append(lines[i])
            return "\n".join(command)
    raise AssertionError(f"README.md has no command starting with {prefix!r}")


def run(env, *args, cwd, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run(
        list(args), env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def added_and_listed(env, tmp_path, command: str) -> str:
    """``command`` (a ``claude mcp add``) run in a new project, then the line
    ``claude mcp list`` shows for contextops."""
    project = tmp_path / "project"
    project.mkdir()
    added = run(env, "bash", "-c", command, cwd=project)
    assert added.returncode == 0, added.stdout + added.stderr
    done = run(env, "claude", "mcp", "list", cwd=project, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    return next(line for line in done.stdout.splitlines() if line.startswith("contextops:"))


def test_claude_code_adds_the_readme_s_stdio_command_and_connects(agent, hosts, tmp_path):
    command = readme_command("claude mcp add --transport stdio")
    command = command.replace("http://127.0.0.1:8000", agent.url).replace("cops_...", agent.key)
    line = added_and_listed(hosts, tmp_path, command)
    assert "contextops mcp" in line and "Connected" in line, line
    # written in the temporary HOME, for this project
    config = json.loads((Path(hosts["HOME"]) / ".claude.json").read_text())
    server = config["projects"][str(tmp_path / "project")]["mcpServers"]["contextops"]
    assert server["env"] == {"CONTEXTOPS_URL": agent.url, "CONTEXTOPS_API_KEY": agent.key}


def test_claude_code_adds_the_readme_s_http_command_and_connects(
    agent,
    hosts,
    http_server,  # noqa: F811
    tmp_path,
):
    command = readme_command("claude mcp add --transport http")
    command = re.sub(r"http://HOST:\d+/mcp", http_server, command).replace("cops_...", agent.key)
    line = added_and_listed(hosts, tmp_path, command)
    assert http_server in line and "Connected" in line, line


def test_claude_code_shows_a_wrong_key_over_http_as_not_connected(
    agent,
    hosts,
    http_server,  # noqa: F811
    tmp_path,
):
    command = readme_command("claude mcp add --transport http")
    command = re.sub(r"http://HOST:\d+/mcp", http_server, command)  # cops_... left as is
    assert "✔ Connected" not in added_and_listed(hosts, tmp_path, command)


# -- the MCP Inspector's CLI ---------------------------------------------------------------


def inspect(env, agent, *args: str) -> dict:
    """One Inspector CLI call against ``contextops mcp`` over stdio; its JSON answer."""
    done = run(
        env,
        "mcp-inspector",
        "--cli",
        "-e",
        f"CONTEXTOPS_URL={agent.url}",
        "-e",
        f"CONTEXTOPS_API_KEY={agent.key}",
        script(),
        "mcp",
        *args,
        cwd=env["HOME"],
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def test_the_inspector_lists_calls_reads_and_prompts(agent, ops, hosts):
    tools = inspect(hosts, agent, "--method", "tools/list")["tools"]
    assert {"session_start", "frame_push", "context_pack", "fact_write"} <= {
        t["name"] for t in tools
    }

    started = inspect(
        hosts,
        agent,
        "--method",
        "tools/call",
        "--tool-name",
        "session_start",
        "--tool-arg",
        "model=claude-sonnet-4-6",
    )
    assert not started.get("isError"), started
    session = started["structuredContent"]
    assert session["dashboard_url"] == f"{agent.url}/sessions/{session['id']}/"  # absolute
    ops.frame_push(session["id"], goal="Read the RFC", budget=5_000)
    ops.working_set_put(session["id"], "draft", "section 2 done")

    read = inspect(
        hosts,
        agent,
        "--method",
        "resources/read",
        "--uri",
        f"contextops://sessions/{session['id']}",
    )
    summary = json.loads(read["contents"][0]["text"])
    assert summary["id"] == session["id"] and summary["model"] == "claude-sonnet-4-6"

    prompts = inspect(hosts, agent, "--method", "prompts/list")["prompts"]
    assert {p["name"] for p in prompts} == {"resume_session", "whats_in_my_window"}
    assert all(p["arguments"][0] == {**p["arguments"][0], "name": "session_id"} for p in prompts)

    window = inspect(
        hosts,
        agent,
        "--method",
        "prompts/get",
        "--prompt-name",
        "whats_in_my_window",
        "--prompt-args",
        f"session_id={session['id']}",
    )
    text = window["messages"][0]["content"]["text"]
    assert "Read the RFC" in text and 'draft: "section 2 done"' in text
    assert "of 200000 tokens" in text

    resume = inspect(
        hosts,
        agent,
        "--method",
        "prompts/get",
        "--prompt-name",
        "resume_session",
        "--prompt-args",
        f"session_id={session['id']}",
    )
    text = resume["messages"][0]["content"]["text"]
    assert f"Resume contextops session {session['id']}" in text and "- Read the RFC" in text
