"""deploy/systemd: units that ``systemd-analyze verify`` accepts, consistent with rota."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from tests.deploy.kit import DEPLOY, VENV_BIN, longest_executor_stop, parse_rota, run, tool

SYSTEMD = DEPLOY / "systemd"
INSTALLED_ROTA = "/opt/rota/bin/rota"  # where the units expect rota (docs/deployment-kit.md)
LONG_RUNNING = ("rota-scheduler.service", "rota-executor@.service", "rota-serve.service")
HARDENING = {
    "NoNewPrivileges": "yes",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "PrivateDevices": "yes",
    "CapabilityBoundingSet": "",
    "RestrictSUIDSGID": "yes",
}

Unit = dict[str, list[tuple[str, str]]]  # section -> its (key, value) lines, in order


def units() -> list[Path]:
    return sorted(SYSTEMD.glob("*.service"))


def read_unit(path: Path) -> Unit:
    unit: Unit = {}
    section = ""
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            unit[section] = []
        else:
            key, _, value = line.partition("=")
            unit[section].append((key, value))
    return unit


def values(unit: Unit, key: str, section: str = "Service") -> list[str]:
    return [v for k, v in unit.get(section, []) if k == key]


def seconds(text: str) -> float:
    """A systemd time span of the forms the units use: ``90s``, ``10min``, ``90``."""
    for suffix, scale in (("min", 60.0), ("s", 1.0)):
        if text.endswith(suffix):
            return float(text.removesuffix(suffix)) * scale
    return float(text)


def test_every_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    analyze = tool("systemd-analyze", "Debian: apt-get install systemd")
    rota = VENV_BIN / "rota"
    assert rota.is_file(), f"{rota}: verify needs the ExecStart binary to exist"
    # The units as installed, with rota where this environment has it.
    for path in units():
        (tmp_path / path.name).write_text(path.read_text().replace(INSTALLED_ROTA, str(rota)))
    names = [p.name.replace("@.service", "@default.service") for p in units()]
    result = run([analyze, "verify", *(str(tmp_path / n) for n in names)], cwd=tmp_path)
    # verify exits 0 on an unknown key or a bad value: it only warns, naming the file.
    complaints = [
        line
        for line in (result.stdout + result.stderr).splitlines()
        if str(tmp_path) in line or any(n.split("@")[0] in line for n in names)
    ]
    assert result.returncode == 0, result.stdout + result.stderr
    assert not complaints, "\n".join(complaints)


def test_every_command_of_the_units_is_one_rota_accepts() -> None:
    commands = []
    for path in units():
        for line in values(read_unit(path), "ExecStart"):
            words = shlex.split(line.replace("%i", "default"))
            assert words[0] == INSTALLED_ROTA, path.name
            commands.append(parse_rota(words[1:]).command)
    assert sorted(commands) == ["apply", "check", "executor", "migrate", "scheduler", "serve"]


def test_units_run_as_rota_with_the_environment_file_and_are_hardened() -> None:
    for path in units():
        unit = read_unit(path)
        assert values(unit, "User") == values(unit, "Group") == ["rota"], path.name
        assert values(unit, "EnvironmentFile") == ["/etc/rota/rota.env"], path.name
        for key, value in HARDENING.items():
            assert values(unit, key) == [value], (path.name, key)


@pytest.mark.parametrize("name", LONG_RUNNING)
def test_long_running_units_restart_on_failure_and_stop_with_sigterm(name: str) -> None:
    unit = read_unit(SYSTEMD / name)
    assert values(unit, "Restart") == ["on-failure"]
    assert values(unit, "KillSignal") == ["SIGTERM"]
    # SIGTERM to rota only: the executor stops its handlers' subprocesses itself.
    assert values(unit, "KillMode") == ["mixed"]
    assert values(unit, "WantedBy", "Install") == ["multi-user.target"]


def test_the_executor_stop_timeout_outlasts_its_drain() -> None:
    unit = read_unit(SYSTEMD / "rota-executor@.service")
    (command,) = values(unit, "ExecStart")
    drain = parse_rota(shlex.split(command.replace("%i", "default"))[1:]).drain_timeout
    (timeout,) = values(unit, "TimeoutStopSec")
    assert seconds(timeout) > longest_executor_stop(drain)
