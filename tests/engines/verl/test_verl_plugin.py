"""``import verl`` finds rlvr through the ``verl.plugins`` entry point (a fresh interpreter)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("verl")

from rlvr.objectives import OBJECTIVES  # noqa: E402

PROBE = """
import json, sys
assert "rlvr" not in sys.modules and "rlvr.engines.verl" not in sys.modules
import verl
from verl.trainer.ppo import core_algos
from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY
print(json.dumps({
    "losses": sorted(k for k in core_algos.POLICY_LOSS_REGISTRY if k.startswith("rlvr_")),
    "advantages": sorted(k for k in core_algos.ADV_ESTIMATOR_REGISTRY if k.startswith("rlvr_")),
    "trainer": TRAINER_REGISTRY.get("rlvr").__name__ if "rlvr" in TRAINER_REGISTRY else None,
}))
"""


def probe(**env):
    run = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        cwd="/",
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_importing_verl_registers_every_objective_and_the_trainer():
    found = probe()
    assert found["losses"] == sorted(f"rlvr_{name}" for name in OBJECTIVES)
    assert found["advantages"] == ["rlvr_batch_std", "rlvr_group_mean", "rlvr_group_std"]
    assert found["trainer"] == "RlvrTrainer"


def test_without_plugins_nothing_is_registered():
    """Guard that the test above can fail: verl's own switch turns discovery off."""
    found = probe(VERL_USE_EXTERNAL_PLUGINS="none")
    assert found == {"losses": [], "advantages": [], "trainer": None}


def test_the_documented_explicit_modules_register_the_losses_and_the_trainer():
    """docs/engines.md's ``VERL_USE_EXTERNAL_MODULES`` value, with discovery off, loads what the
    entry points load: the losses and estimators, and the ``rlvr`` trainer mode."""
    docs = (Path(__file__).resolve().parents[3] / "docs" / "engines.md").read_text()
    (modules,) = re.findall(r"`VERL_USE_EXTERNAL_MODULES=([^`]+)`", docs)
    found = probe(VERL_USE_EXTERNAL_PLUGINS="none", VERL_USE_EXTERNAL_MODULES=modules)
    assert found == probe()


def test_without_verl_the_import_names_the_extra(import_without):
    """``import rlvr.engines.verl`` without verl says what to install, in one line."""
    with pytest.raises(ImportError, match=r'needs verl: pip install "rlvr\[verl\]"'):
        import_without("verl")
