"""deploy/prometheus: rules promtool accepts, unit-tested alert by alert."""

from __future__ import annotations

from typing import Any

import yaml

from tests.deploy.kit import DEPLOY, run, tool

PROMETHEUS = DEPLOY / "prometheus"
RULES = PROMETHEUS / "rota-alerts.yml"
RULE_TESTS = PROMETHEUS / "rota-alerts.test.yml"
INSTALL = "Debian: apt-get install prometheus, which ships promtool"


def alert_rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def test_the_rules_pass_promtool_check_rules() -> None:
    result = run([tool("promtool", INSTALL), "check", "rules", str(RULES)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alert_rules())} rules found" in result.stdout


def test_the_rules_pass_their_promtool_unit_tests() -> None:
    result = run([tool("promtool", INSTALL), "test", "rules", RULE_TESTS.name], cwd=PROMETHEUS)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_a_runbook_and_tests_that_make_it_fire_and_not_fire() -> None:
    alerts = {rule["alert"] for rule in alert_rules()}
    assert len(alerts) == len(alert_rules()), "two rules with one name"
    for rule in alert_rules():
        assert rule["annotations"]["runbook"].strip(), rule["alert"]
        assert rule["labels"]["severity"] in ("warning", "critical"), rule["alert"]
    fired: set[str] = set()
    quiet: set[str] = set()
    for group in yaml.safe_load(RULE_TESTS.read_text())["tests"]:
        for case in group.get("alert_rule_test", []):
            (fired if case["exp_alerts"] else quiet).add(case["alertname"])
    assert fired == alerts, "alerts no test makes fire"
    assert quiet == alerts, "alerts no test checks stay quiet"
