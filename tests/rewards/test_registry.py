"""The verifier registry: specs, options, errors that list valid names."""

from __future__ import annotations

import sys

import pytest

from rlvr.rewards import available_verifiers, get_verifier, parse_spec, register
from rlvr.rewards.registry import BUILTIN_MODULES, VERIFIERS


def test_builtin_names_are_listed():
    names = available_verifiers()
    assert {"math", "reasoning_gym"} <= set(names)


def test_unknown_verifier_lists_valid_ones():
    with pytest.raises(ValueError, match="unknown verifier 'maths'.*math"):
        get_verifier("maths")
    with pytest.raises(ValueError, match=r"registers \(did you mean reasoning_gym\?\)$"):
        get_verifier("reasoning_gm:chain_sum")  # as the objectives' registry suggests


def test_unknown_option_lists_valid_ones():
    with pytest.raises(
        ValueError, match=r"no option\(s\) \['wrongg'\].*'correct', 'extract', 'wrong'"
    ):
        get_verifier("math", wrongg=-1)


def test_reward_pair_sets_correct_and_failure_values():
    etr = get_verifier("math", correct=1.0, wrong=-1.0)
    assert (etr.correct_value, etr.failure_value) == (1.0, -1.0)
    apmpo = get_verifier("math")
    assert (apmpo.correct_value, apmpo.failure_value) == (1.0, 0.0)


def test_spec_argument_binds_the_declared_option():
    verifier = get_verifier("reasoning_gym:chain_sum")
    assert verifier.options == {"task": "chain_sum"}
    assert verifier("<answer>3</answer>", "3") == 1.0
    with pytest.raises(ValueError, match="takes no ':argument'"):
        get_verifier("math:foo")


@pytest.mark.parametrize("spec", ["", "math+bold", "+format"])
def test_bad_specs(spec):
    with pytest.raises(ValueError, match="bad verifier spec"):
        parse_spec(spec)


def test_register_a_new_verifier():
    @register("length_test", spec_arg="limit")
    def length(completion, reference, *, limit="3", correct=1.0, wrong=0.0):
        return correct if len(completion) <= int(limit) else wrong

    try:
        assert get_verifier("length_test:5")("12345", None) == 1.0
        assert get_verifier("length_test", wrong=-1.0)("1234", None) == -1.0
        assert "length_test" in available_verifiers()
    finally:
        VERIFIERS.pop("length_test")


def test_another_function_under_a_taken_verifier_name_is_refused():
    """A module registering its own ``math`` silently replaced the built-in verifier, which
    every run naming ``math`` then trained and was evaluated with."""
    get_verifier("math")  # the built-in one is registered
    with pytest.raises(ValueError, match=r"verifier 'math' is already registered \(rlvr\."):
        register("math")(lambda completion, reference: 1.0)
    assert get_verifier("math")("\\boxed{3}", "4") == 0.0  # still the built-in
    fn = register("same_test")(lambda completion, reference: 1.0)
    try:
        register("same_test")(fn)  # the same function again (its module reloaded) is fine
    finally:
        VERIFIERS.pop("same_test")


def test_a_builtin_name_is_taken_before_its_module_is_imported(tmp_path, monkeypatch):
    """Registered before the built-in module of its name was imported, another function took
    the name (every run naming it then scored with it), and that module then failed to import."""
    (tmp_path / "builtin_probe.py").write_text(
        "from rlvr.rewards import register\n\n\n"
        "@register('builtin_probe')\n"
        "def probe(completion, reference):\n"
        "    return 1.0\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(BUILTIN_MODULES, "builtin_probe", "builtin_probe")
    try:
        with pytest.raises(
            ValueError, match=r"verifier 'builtin_probe' is already registered \(builtin_probe\)"
        ):
            register("builtin_probe")(lambda completion, reference: 0.0)
        assert get_verifier("builtin_probe")("x", None) == 1.0  # the built-in one
    finally:
        VERIFIERS.pop("builtin_probe", None)
        sys.modules.pop("builtin_probe", None)


def test_register_rejects_bad_declarations():
    with pytest.raises(ValueError, match="without ':' or '\\+'"):
        register("a:b")
    with pytest.raises(ValueError, match="spec_arg 'task'"):
        register("x_test", spec_arg="task")(lambda completion, reference, *, other=1: 0.0)


@pytest.mark.parametrize(
    ("spec", "options", "message"),
    [
        ("math", {"extract": "Flexible"}, "extract must be one of"),
        ("math", {"compare_timeout_s": 0}, "compare_timeout_s"),
        ("math", {"compare_memory_mb": -1}, "compare_memory_mb"),
        ("reasoning_gym", {"extract": "last"}, "extract must be one of"),
        ("reasoning_gym:no_such_task", {}, "unknown reasoning-gym task"),
        ("reasoning_gym:chain_sum", {"binary": "false"}, "binary must be True or False"),
        ("code:bin", {}, "mode must be one of"),
        # a wrong completion paid as much as a right one, or more (or a NaN score, a failure)
        ("math", {"correct": 1.0, "wrong": 1.0}, r"correct score \(1.0\) must be .* above"),
        ("reasoning_gym", {"correct": -1.0, "wrong": 1.0}, "must be a finite number above"),
        ("math+format", {"correct": float("nan")}, "must be a finite number above"),
        ("code", {"wrong": float("-inf")}, "must be a finite number above"),
        ("math", {"correct": "1"}, "must be a finite number above"),
    ],
)
def test_bad_option_values_are_refused_when_the_verifier_is_built(spec, options, message):
    # Not at the first completion, where every score would silently become the failure value.
    with pytest.raises(ValueError, match=message):
        get_verifier(spec, **options)


OWN_MODULE = """
from rlvr.rewards import register


@register("exact_{tag}", spec_arg="field")
def exact(completion, reference, *, field="answer", correct=1.0, wrong=0.0):
    return correct if completion.strip() == str(reference[field]) else wrong
"""


def test_a_dotted_name_imports_your_module_from_the_working_directory(tmp_path, monkeypatch):
    """`reward.verifier=my_checks.exact` (and `--verifier`) reach a verifier your own module
    registers, as the commands run it: the module is a file in the working directory, which
    is not on sys.path, and the scoring workers (fresh interpreters) import it too."""
    from rlvr.rewards import Scorer
    from rlvr.rewards.scoring import ScoringConfig

    tag = tmp_path.name.replace("-", "_")
    (tmp_path / f"checks_{tag}.py").write_text(OWN_MODULE.format(tag=tag))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", [p for p in __import__("sys").path if p not in ("", ".")])
    spec = f"checks_{tag}.exact_{tag}:answer"
    verifier = get_verifier(spec, wrong=-1.0)
    assert verifier.spec == spec
    assert (verifier(" 42 ", {"answer": "42"}), verifier("41", {"answer": "42"})) == (1.0, -1.0)
    scores = Scorer(verifier, ScoringConfig(workers=1))(["42", "x"], [{"answer": "42"}] * 2)
    assert scores.values == [1.0, -1.0] and scores.status == ["ok", "ok"]
    with pytest.raises(ValueError, match=rf"module 'checks_{tag}' registers no 'nope'"):
        get_verifier(f"checks_{tag}.nope")
    with pytest.raises(ValueError, match="no module 'not_here_at_all' to import"):
        get_verifier("not_here_at_all.exact")
