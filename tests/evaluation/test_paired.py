"""Paired differences of two evaluations of the same problems (``rlvr eval --against``)."""

from __future__ import annotations

import json
import math
import re
import statistics
import warnings

import numpy as np
import pytest
from scipy.stats import t as student_t

from rlvr.evaluation.metrics import pass_at_k
from rlvr.evaluation.paired import (
    compare_reports,
    paired_differences,
    read_report,
    summary,
)


def _report(counts, n=4, verifier="math", ids=None, references=None):
    ids = ids or [str(i) for i in range(len(counts))]
    references = references or ["7"] * len(counts)
    problems = [
        {"dataset": "d", "id": i, "reference": r, "n": n, "c": c}
        for i, r, c in zip(ids, references, counts, strict=True)
    ]
    return {"verifier": verifier, "problems": problems}


def test_differences_are_the_paired_t_interval_over_problems():
    new, base = [4, 3, 2, 4, 1, 0], [2, 3, 1, 4, 0, 1]
    found = paired_differences(_report(new), _report(base))
    assert list(found) == ["avg@4", "pass@4"]
    d = [(a - b) / 4 for a, b in zip(new, base, strict=True)]  # .5 0 .25 0 .25 -.25
    mean, se = statistics.mean(d), statistics.stdev(d) / math.sqrt(6)
    half = student_t.ppf(0.975, 5) * se
    avg = found["avg@4"]
    assert avg.mean == pytest.approx(0.125, abs=1e-15) and avg.problems == 6
    assert (avg.low, avg.high) == pytest.approx((mean - half, mean + half), abs=1e-12)
    assert avg.p == pytest.approx(2 * student_t.sf(mean / se, 5), abs=1e-12)
    gains = [pass_at_k(4, a, 4) - pass_at_k(4, b, 4) for a, b in zip(new, base, strict=True)]
    assert found["pass@4"].mean == pytest.approx(statistics.mean(gains), abs=1e-15)  # 0 0 0 0 1 -1
    assert summary({"avg@4": avg}).startswith("avg@4 +12.5 [")


def test_pass_at_k_uses_the_smaller_n_and_one_sample_gives_avg_only():
    found = paired_differences(_report([8, 0], n=8), _report([2, 1], n=4))
    assert list(found) == ["avg@4", "pass@4"]
    assert found["pass@4"].mean == pytest.approx(((1 - 1) + (0 - 1)) / 2)
    assert list(paired_differences(_report([1, 0], n=1), _report([0, 0], n=1))) == ["avg@1"]


def test_ks_add_the_pass_at_k_a_runs_held_out_scores_hold():
    """A run's held-out scores hold avg@k and pass@k of each eval.ks (pass@2 with n 4), whose
    paired intervals its summary gives: without ks there was only avg@4 and pass@4."""
    new, base = [4, 3, 2, 4, 1, 0], [2, 3, 1, 4, 0, 1]
    found = paired_differences(_report(new), _report(base), ks=[1, 2, 4, 8])
    assert list(found) == ["avg@4", "pass@4", "avg@1", "pass@1", "avg@2", "pass@2"]
    assert found["avg@1"] == found["avg@4"] and found["pass@1"].mean == found["avg@4"].mean
    gains = [pass_at_k(4, a, 2) - pass_at_k(4, b, 2) for a, b in zip(new, base, strict=True)]
    mean, se = statistics.mean(gains), statistics.stdev(gains) / math.sqrt(6)
    half = student_t.ppf(0.975, 5) * se
    two = found["pass@2"]
    assert two.mean == pytest.approx(mean, abs=1e-15) and two.problems == 6
    assert (two.low, two.high) == pytest.approx((mean - half, mean + half), abs=1e-12)


def test_without_a_difference_the_interval_holds_zero_95_times_in_100():
    """Calibration: two evaluations of one model (200 problems of spread difficulty, n=4,
    independent samples) give an interval excluding 0 in about 5% of trials."""
    rng = np.random.default_rng(0)
    difficulty = rng.uniform(0, 1, 200)
    trials, excluded = 1000, 0
    for _ in range(trials):
        a, b = rng.binomial(4, difficulty), rng.binomial(4, difficulty)
        d = paired_differences(_report(list(a)), _report(list(b)))["avg@4"]
        excluded += not d.low <= 0 <= d.high
    assert 0.03 < excluded / trials < 0.07, excluded


@pytest.mark.parametrize(
    ("base", "said"),
    [
        (_report([1, 2], verifier="code"), "scored with verifier 'math' and 'code'"),
        (_report([1, 2, 3]), "other problems (2 and 3, 2 in both)"),
        (_report([1, 2], ids=["0", "9"]), "other problems (2 and 2, 1 in both)"),
        (_report([1, 2], references=["7", "8"]), "problem d/1 has another reference"),
        (_report([1, 2], ids=["0", "0"]), "the base report names problem d/0 twice"),
    ],
)
def test_reports_of_other_problems_or_verifiers_are_refused(base, said):
    with pytest.raises(ValueError, match=re.escape(said)):
        paired_differences(_report([1, 2]), base)


def test_a_problem_named_twice_is_named_with_its_report():
    """The error "a report names one problem twice" said neither which report nor which one: in
    `rlvr eval --against` the new one is the data being evaluated, the base the file given."""
    twice = _report([1, 2, 3], ids=["0", "1", "1"])
    with pytest.raises(ValueError, match=re.escape("the new report names problem d/1 twice")):
        paired_differences(twice, _report([1, 2, 3]))


def test_a_reference_is_compared_as_its_json(tmp_path):
    """A code reference of tuples reads back from the JSON as lists: the same problem."""
    tupled = _report([1], references=[{"inputs": [(1, 2)], "outputs": ["3"]}])
    listed = json.loads(json.dumps(tupled))
    assert paired_differences(tupled, listed)["avg@4"].mean == 0


def test_a_file_that_is_no_report_is_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"metrics": {}}')
    with pytest.raises(ValueError, match=r"bad.json: not an rlvr eval report \(no problems"):
        read_report(bad)
    with pytest.raises(ValueError, match=r"missing.json: no such file$"):
        read_report(tmp_path / "missing.json")  # was "not an rlvr eval report ([Errno 2] ..."
    with pytest.raises(ValueError, match=r": is a directory; name an rlvr eval report \(a .json"):
        read_report(tmp_path)


def test_each_datasets_differences_are_its_own_problems():
    new, base = _report([4, 0, 2, 2]), _report([0, 0, 2, 2])
    for report in (new, base):
        for problem in report["problems"][2:]:
            problem["dataset"] = "e"
    found = compare_reports(new, base).per_dataset
    assert list(found) == ["d", "e"]
    assert found["d"]["avg@4"].mean == 0.5 and found["d"]["avg@4"].problems == 2
    assert found["e"]["avg@4"] == (0.0, 0.0, 0.0, 1.0, 2)  # level everywhere: p 1
    assert paired_differences(new, base)["avg@4"].mean == 0.25


@pytest.mark.parametrize(
    "edit",
    [
        {"n": "4"},
        {"n": 0, "c": 0},
        {"n": 1.5},
        {"c": 5},
        {"c": -1},
        {"c": None},
        {"c": True},
        {"id": 0},
        {"dataset": ["d"]},
    ],
)
def test_a_report_with_malformed_counts_or_names_is_refused_when_read(tmp_path, edit):
    """A hand-edited base report (``"n": "4"``, ``c`` above ``n``, a list as dataset) passed
    read_report and failed with a traceback after the new evaluation had sampled, its report
    unwritten; it is now one line naming the problem, before anything loads."""
    report = _report([1, 2])
    report["problems"][1] |= edit
    path = tmp_path / "base.json"
    path.write_text(json.dumps(report))
    with pytest.raises(ValueError, match=r"base.json: not an rlvr eval report \(a problem whose"):
        read_report(path)
    path.write_text(json.dumps({"problems": _report([1])["problems"]}))
    with pytest.raises(ValueError, match=r"base.json: not an rlvr eval report \(no verifier\)"):
        read_report(path)
    path.write_text(json.dumps(_report([1, 2])))
    assert read_report(path) == _report([1, 2])


def test_the_python_api_refuses_verifier_options_that_decide_otherwise_too():
    """`paired_differences` compared the verifiers' names only (the CLI checked the options):
    a flexible-extraction report against a strict one read as a difference of models."""
    strict, flexible = _report([1, 2]), _report([1, 2])
    flexible["verifier_options"] = {"extract": "flexible"}
    with pytest.raises(ValueError, match=re.escape("{} (new) and {'extract': 'flexible'} (base)")):
        paired_differences(strict, flexible)
    rescored = {**strict, "verifier_options": {"correct": 2.0, "wrong": -1.0}}  # scales only
    assert paired_differences(rescored, strict)["avg@4"].mean == 0
    explicit = {**strict, "verifier_options": {"extract": "strict"}}  # the default, given
    assert paired_differences(explicit, strict)["avg@4"].mean == 0


def test_other_time_limits_with_timeouts_are_warned_of():
    """Two reports scored with other --timeout values were compared without a word, though a
    timeout counts as wrong; without timeouts, or with one limit, nothing is said."""

    def scored(report, limit, timeouts):
        return {**report, "config": {"scoring": {"timeout_s": limit}},
                "metrics": {"verifier/timeouts": timeouts}}  # fmt: skip

    new, base = _report([1, 2]), _report([2, 2])
    said = r"other verifier time limits \(2\.0 s and 10\.0 s; 3 and 0 completions timed out"
    with pytest.warns(UserWarning, match=said):
        paired_differences(scored(new, 2.0, 3), scored(base, 10.0, 0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        paired_differences(scored(new, 2.0, 0), scored(base, 10.0, 0))
        paired_differences(scored(new, 10.0, 3), scored(base, 10.0, 1))
        paired_differences(new, scored(base, 10.0, 1))  # a report without its limit


def _voted(report, votes):
    """``report`` with each problem's answer keys and verdicts (``votes``: one list of
    ``(key, correct)`` per problem)."""
    problems = [
        {**p, "answers": [a for a, _ in v], "correct": [c for _, c in v], "c": sum(c for _, c in v)}
        for p, v in zip(report["problems"], votes, strict=True)
    ]
    return {**report, "problems": problems}


def test_maj_at_k_is_paired_when_both_reports_hold_answer_keys():
    right, wrong, silent = ("7", True), ("8", False), (None, False)  # silent: no answer
    new = _voted(_report([0, 0]), [[right, right, wrong, silent], [right, wrong, wrong, right]])
    base = _voted(_report([0, 0]), [[wrong, wrong, right, silent], [wrong] * 4])
    found = paired_differences(new, base, ks=[1, 2])
    assert list(found) == ["avg@4", "pass@4", "maj@4", "avg@1", "pass@1", "maj@1", "avg@2",
                           "pass@2", "maj@2"]  # fmt: skip
    # maj@4: new 1 (7 7 8) and 1/2 (a tie of 7 7 and 8 8); base 0 and 0 -> +1, +1/2
    assert found["maj@4"].mean == pytest.approx(0.75, abs=1e-15)
    # maj@1: new 2/4 and 2/4; base 1/4 (a vote for 7) and 0 -> +1/4, +1/2
    assert found["maj@1"].mean == pytest.approx(0.375, abs=1e-15)
    assert "maj@4" in compare_reports(new, base).per_dataset["d"]
    # a report without answer keys (code, or an rlvr before maj@k): no maj@k, no error
    assert "maj@4" not in paired_differences(new, _report([1, 0]))


def _evaluated(report, weights="a" * 64, seed=0, temperature=0.6, dtype="float32", **config):
    """``report`` with the settings and weights fingerprint ``rlvr eval`` records."""
    sampling = {"temperature": temperature, "top_p": 1.0, "top_k": 0, "max_new_tokens": 256}
    return {
        **report,
        "weights": {"sha256": weights},
        "loading": {"template": None, "dtype": dtype, "device": "cpu", "autocast": "none"},
        "sampler": {"name": "lean", "options": {}},
        "prompts": {"chat_template": True, "token_ids_sha256": "c" * 64},
        "config": {"n": 4, "seed": seed, "batch_size": 8, "system_prompt": None,
                   "sampling": sampling, **config},
    }  # fmt: skip


def _said(new, base) -> list[str]:
    """The warnings :func:`paired_differences` gives for two reports."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        paired_differences(new, base)
    return [str(w.message) for w in caught]


def test_each_setting_sampled_otherwise_is_one_warning_naming_both_values():
    """Two reports sampled at other temperatures, in other dtypes or with another system prompt
    were paired without a word, as if only their models differed; each such setting is now
    one warning (not a refusal: comparing temperatures can be the point)."""
    new = _evaluated(_report([1, 2]), weights="b" * 64, temperature=1.0, dtype="bfloat16")
    new["config"]["system_prompt"] = "Be brief."
    new["sampler"] = {"name": "vllm", "options": {}}
    assert _said(new, _evaluated(_report([2, 2]))) == [
        "the reports were sampled differently: temperature 1.0 against 0.6; part of the "
        "difference may be that",
        "the reports were sampled differently: system prompt 'Be brief.' against none; part of "
        "the difference may be that",
        "the reports were sampled differently: sampler 'vllm' against 'lean'; part of the "
        "difference may be that",
        "the reports were sampled differently: dtype 'bfloat16' against 'float32'; part of the "
        "difference may be that",
    ]


def test_a_setting_a_report_does_not_record_and_another_seed_pass_without_a_word():
    """A report written before a setting was recorded (no ``loading``, no ``sampling``) passes
    for it; another seed, another n or batch size changes which completions are drawn, not
    what they are drawn from: the paired interval covers it, so nothing is said."""
    new = _evaluated(_report([1, 2]), weights="b" * 64, seed=1, n=8, batch_size=2)
    old = {**_report([2, 2]), "config": {"seed": 0}}
    assert _said(new, old) == []
    assert _said(new, _evaluated(_report([2, 2]))) == []


def test_the_same_weights_sampled_the_same_way_are_noise_not_a_finding():
    """Two reports of one checkpoint sampled alike were printed as a comparison of two
    models, p-value and all; they now say that any difference is sampling noise, without a
    p-value, and the JSON records it."""
    from rlvr.cli.eval_against import paired

    new, base = _evaluated(_report([4, 3, 2, 1])), _evaluated(_report([3, 3, 2, 0]))
    section, lines = paired("base.json", new, base)
    assert lines[0] == (
        "both reports evaluated the same weights (aaaaaaaaaaaa) the same way, so any difference "
        "is sampling noise (seed) and not a difference of models"
    )
    assert lines[1].startswith(
        "against base.json, paired by problem (percentage points, 95%; sampling noise, not a "
        "finding): avg@4 +12.5 ["
    )
    assert " p " not in lines[1] and len(lines) == 2
    assert section["same_weights"] is True and section["noise_only"] is True
    assert section["other_settings"] == {} and section["all"]["avg@4"]["p"] is not None


def test_the_same_weights_under_another_seed_measure_the_noise_floor():
    from rlvr.cli.eval_against import paired

    new = _evaluated(_report([4, 3, 2, 1]), seed=1)
    section, lines = paired("base.json", new, _evaluated(_report([3, 3, 2, 0])))
    assert lines[0] == (
        "both reports evaluated the same weights (aaaaaaaaaaaa) the same way but for the seed 1 "
        "against 0: the difference measures sampling noise (a noise floor), not a difference "
        "of models"
    )
    assert " p " not in lines[1] and section["noise_only"] is True
    assert section["other_settings"] == {"seed": [1, 0]}


def test_the_same_weights_sampled_otherwise_are_the_settings_difference_tested():
    from rlvr.cli.eval_against import paired

    new = _evaluated(_report([4, 3, 2, 1]), temperature=1.0)
    with pytest.warns(UserWarning, match="temperature 1.0 against 0.6"):
        section, lines = paired("base.json", new, _evaluated(_report([3, 3, 2, 0])))
    assert lines[0] == (
        "both reports evaluated the same weights (aaaaaaaaaaaa) sampled otherwise: the "
        "difference is the settings', not the models'"
    )
    assert lines[1].startswith("against base.json, paired by problem (percentage points, 95%): ")
    assert " p " in lines[1] and section["noise_only"] is False


@pytest.mark.parametrize("weights", ["b" * 64, None])
def test_other_or_unrecorded_weights_are_compared_as_models(weights):
    """Another fingerprint, or a report without one (written before it was recorded), is a
    comparison of models as before: no line about the weights, p-values."""
    from rlvr.cli.eval_against import paired

    new = _evaluated(_report([4, 3, 2, 1]), weights=weights, seed=1)
    if weights is None:
        del new["weights"]
    section, lines = paired("base.json", new, _evaluated(_report([3, 3, 2, 0])))
    assert len(lines) == 1 and lines[0].startswith("against base.json, paired by problem (")
    assert " p " in lines[0] and section["noise_only"] is False
    assert section["same_weights"] is (False if weights else None)


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        ({"config": [1, 2]}, "'config' is an array, not an object"),
        ({"config": {"sampling": "hot"}}, "'config.sampling' is a string, not an object"),
        ({"weights": "abc"}, "'weights' is a string, not an object"),
        ({"weights": {"sha256": 5}}, "'weights.sha256' is 5, not a sha256 digest"),
        ({"weights": {"sha256": "x" * 64}}, "'weights.sha256' is 'xxxx"),
        ({"prompts": None}, "'prompts' is null, not an object"),
        ({"metrics": [0.5]}, "'metrics' is an array, not an object"),
    ],
)
def test_a_report_whose_settings_or_fingerprint_have_another_shape_is_refused(tmp_path, edit, said):
    """A hand-edited base report with ``config`` a list stopped with an ``AttributeError``
    traceback after the new evaluation had sampled; a ``weights.sha256`` of 5 or a
    ``config.sampling`` of text passed as unrecorded, without a word."""
    path = tmp_path / "base.json"
    path.write_text(json.dumps({**_evaluated(_report([1, 2])), **edit}))
    with pytest.raises(
        ValueError, match=r"base.json: not an rlvr eval report \(" + re.escape(said)
    ):
        read_report(path)
    path.write_text(json.dumps({**_evaluated(_report([1, 2])), "weights": {"sha256": None}}))
    assert read_report(path)["weights"] == {"sha256": None}  # unknown weights pass


def test_a_recorded_timeout_count_that_is_no_number_counts_none():
    """``verifier/timeouts`` of text went through ``int()``: a ValueError traceback."""
    new = {**_report([1, 2]), "config": {"scoring": {"timeout_s": 2.0}}}
    base = {**_report([2, 2]), "config": {"scoring": {"timeout_s": 10.0}},
            "metrics": {"verifier/timeouts": "many"}}  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        paired_differences(new, base)


@pytest.mark.parametrize(
    "edit",
    [
        {"answers": [{}, None]},
        {"answers": "ab"},
        {"answers": ["7"]},
        {"answers": [7, 8]},
        {"correct": [1, 0]},
        {"correct": [True]},
    ],
)
def test_a_problem_whose_votes_have_another_shape_is_refused_when_read(tmp_path, edit):
    """A hand-edited ``answers`` of objects stopped maj@k with ``TypeError: unhashable type``
    after the new evaluation had sampled; one of another length left maj@k out unsaid."""
    report = _voted(_report([0, 0], n=2), [[("7", True), (None, False)], [("7", True)] * 2])
    path = tmp_path / "base.json"
    path.write_text(json.dumps(report))
    assert read_report(path) == report
    report["problems"][1] |= edit
    path.write_text(json.dumps(report))
    said = r"not an rlvr eval report \(a problem whose answers are not one text or null per sample"
    with pytest.raises(ValueError, match=said + r".*\"id\": \"1\""):
        read_report(path)
