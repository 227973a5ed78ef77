"""rlvr data filter: keeps exactly the prompts whose measured pass rate meets the rule, and
resumes after a kill without sampling finished prompts again (stub sampler, known outputs)."""

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from rlvr.evaluation.filtering import FilterJob, filter_file, passrates_file
from rlvr.evaluation.harness import EvalConfig
from rlvr.evaluation.keep_rule import parse_rule
from rlvr.generation.base import Generation
from rlvr.rewards import ScoringConfig, get_verifier

N = 4
# prompt "q<i>" (answer 7) gets i correct completions of 4: pass rates 0, .25, .5, .75, 1
ROWS = [{"id": f"p{i}", "prompt": f"q{i}", "answer": "7"} for i in range(5)]


class CharTokenizer:
    """Characters as token ids; no chat template, no BOS."""

    chat_template = None
    bos_token_id = None

    def __call__(self, texts, add_special_tokens=True):
        if isinstance(texts, str):
            return {"input_ids": [ord(c) for c in texts]}
        return {"input_ids": [[ord(c) for c in t] for t in texts]}


class KnownSampler:
    """Prompt ``q<i>``: ``i`` completions ``\\boxed{7}``, the rest ``\\boxed{0}``; raises
    ``Killed`` on call number ``kill_at`` (counting from 0)."""

    def __init__(self, kill_at=None):
        self.calls, self.sampled, self.kill_at = 0, [], kill_at

    def generate(self, prompt_ids, *, n, sampling):
        if self.calls == self.kill_at:
            raise Killed
        self.calls += 1
        prompts = ["".join(map(chr, ids)) for ids in prompt_ids]
        self.sampled += prompts
        texts = [
            "\\boxed{7}" if j < int(p[1:]) else "\\boxed{0}" for p in prompts for j in range(n)
        ]
        rows = len(texts)
        return Generation(
            prompt_ids=torch.ones(rows, 1, dtype=torch.long),
            prompt_mask=torch.ones(rows, 1, dtype=torch.long),
            response_ids=torch.ones(rows, 2, dtype=torch.long),
            response_mask=torch.ones(rows, 2, dtype=torch.long),
            truncated=torch.zeros(rows, dtype=torch.bool),
            texts=texts,
            prompt_index=[i // n for i in range(rows)],
        )


class Killed(Exception):
    """Stands for the process being killed."""


def _run(
    tmp_path,
    keep,
    sampler,
    out="kept.jsonl",
    rows=ROWS,
    verifier=None,
    n=N,
    fields=None,
    workers=0,
    named="lean",
):
    """Filter ``rows`` with ``sampler`` (``None``: the job makes the one ``named``)."""
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = EvalConfig(n=n, ks=(1,), batch_size=2, scoring=ScoringConfig(workers=workers))
    job = FilterJob(parse_rule(keep, n), config, fields or "default", model="stub", sampler=named)
    return filter_file(
        src,
        tmp_path / out,
        job,
        model=torch.nn.Linear(1, 1),
        tokenizer=CharTokenizer(),
        verifier=verifier or get_verifier("math"),
        sampler=sampler,
    )


def _ids(path):
    return [json.loads(line)["id"] for line in path.read_text().splitlines()]


@pytest.mark.parametrize(
    ("keep", "kept"),
    [
        ("mean>=0.5", ["p2", "p3", "p4"]),
        ("mean>0.5", ["p3", "p4"]),
        ("0<mean<1", ["p1", "p2", "p3"]),
        ("pass@4>0.5", ["p1", "p2", "p3", "p4"]),  # pass@n: any correct completion
        ("pass@2>0.5", ["p2", "p3", "p4"]),  # 1 - C(4-c, 2)/C(4, 2): .5 at c=1, 5/6 at c=2
    ],
)
def test_keeps_exactly_the_prompts_meeting_the_rule(tmp_path, keep, kept):
    report = _run(tmp_path, keep, KnownSampler())
    assert _ids(tmp_path / "kept.jsonl") == kept
    assert report.kept == len(kept) and report.dropped == {"rule": 5 - len(kept)}
    rows = [json.loads(x) for x in (tmp_path / "kept.jsonl").read_text().splitlines()]
    assert [r["filter"]["correct"] for r in rows] == [int(i[1:]) for i in kept]
    assert rows[0]["filter"]["pass_rate"] == int(kept[0][1:]) / N


def test_resumes_after_a_kill_without_rescoring(tmp_path):
    first = KnownSampler(kill_at=2)  # batches [p0 p1] [p2 p3] scored, killed on [p4]
    with pytest.raises(Killed):
        _run(tmp_path, "mean>=0.5", first)
    assert first.sampled == ["q0", "q1", "q2", "q3"]
    again = KnownSampler()
    _run(tmp_path, "mean>=0.5", again)
    assert again.sampled == ["q4"]
    assert _ids(tmp_path / "kept.jsonl") == ["p2", "p3", "p4"]
    # another rule re-filters from the recorded scores, sampling nothing
    third = KnownSampler()
    _run(tmp_path, "0<mean<1", third)
    assert third.sampled == [] and _ids(tmp_path / "kept.jsonl") == ["p1", "p2", "p3"]


def test_a_cut_off_last_record_is_sampled_again(tmp_path):
    _run(tmp_path, "mean>=0.5", KnownSampler())
    scores = passrates_file(tmp_path / "kept.jsonl")
    text = scores.read_text()
    scores.write_text(text[: len(text) - 20])  # the kill hit while the last line was written
    again = KnownSampler()
    _run(tmp_path, "mean>=0.5", again)
    assert again.sampled == ["q4"]
    # the records appended after the cut-off line start lines of their own: the file reads
    # whole, and another rule re-filters from it without sampling
    assert all(json.loads(line) for line in scores.read_text().splitlines())
    third = KnownSampler()
    _run(tmp_path, "0<mean<1", third)
    assert third.sampled == [] and _ids(tmp_path / "kept.jsonl") == ["p1", "p2", "p3"]


def test_a_cut_off_header_starts_the_file_again(tmp_path):
    scores = passrates_file(tmp_path / "kept.jsonl")
    scores.write_text('{"keys": "sha256(prompt, ref')  # killed while the first line was written
    again = KnownSampler()
    _run(tmp_path, "mean>=0.5", again)
    assert again.sampled == ["q0", "q1", "q2", "q3", "q4"]
    assert json.loads(scores.read_text().splitlines()[0])["keys"] == "sha256(prompt, reference)"


def test_other_settings_are_refused(tmp_path):
    _run(tmp_path, "mean>=0.5", KnownSampler())
    src = tmp_path / "in.jsonl"
    config = EvalConfig(n=2, ks=(1,), batch_size=2, scoring=ScoringConfig(workers=0))
    with pytest.raises(ValueError, match="other settings"):
        filter_file(
            src,
            tmp_path / "kept.jsonl",
            FilterJob(parse_rule("mean>0", 2), config, model="stub"),
            model=torch.nn.Linear(1, 1),
            tokenizer=CharTokenizer(),
            verifier=get_verifier("math"),
            sampler=KnownSampler(),
        )


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("mean >> 0.5", "expected MEASURE OP NUMBER"),
        ("__import__('os')", "expected MEASURE OP NUMBER"),
        ("1>mean>0", "a window reads"),
        ("pass@8>0.5", r"k must be in \[1, n=4\]"),
        ("mean>1.5", r"can keep no prompt \(mean lies in \[0, 1\]\)"),
        ("mean>1", "can keep no prompt"),
        ("pass@2<0", "can keep no prompt"),
        ("0.6<mean<0.2", "can keep no prompt"),
        ("0.5<=score<0.5", r"can keep no prompt \(no number satisfies it\)"),
    ],
)
def test_bad_rules_are_refused(text, error):
    with pytest.raises(ValueError, match=error):
        parse_rule(text, n=4)


@pytest.mark.parametrize(
    ("text", "n"), [("0<mean<1", 1), ("mean==0.3", 16), ("0.5<mean<0.55", 16), ("0<pass@4<1", 4)]
)
def test_rules_between_the_values_n_samples_give_are_refused(text, n):
    """With n samples the pass rate is one of 0, 1/n, ..., 1 (pass@n: 0 or 1); a rule between
    them kept no prompt, found out only after sampling them all (``0<mean<1`` with ``-n 1``)."""
    with pytest.raises(ValueError, match=rf"can keep no prompt \(with n={n}, "):
        parse_rule(text, n=n)
    assert parse_rule(text).text == text  # without n, only [0, 1] is known
    assert parse_rule("0.5<mean<0.6", n=16).keeps(9 / 16)


def test_rule_windows():
    rule = parse_rule(" 0.2 <= mean <= 0.8 ")
    assert [rule.keeps(v) for v in (0.1, 0.2, 0.8, 0.9)] == [False, True, True, False]
    assert parse_rule("score>0").measured(4, 0, 0.25) == 0.25
    assert parse_rule("mean>=1").keeps(1.0) and parse_rule("score>2").keeps(3.0)
    assert parse_rule("0.5<=mean<=0.5").keeps(0.5)


def test_min_tests_drops_code_problems_with_few_tests(tmp_path):
    from rlvr.data.code_tasks import code_task_rows

    rows = code_task_rows("all", size=2, seed=0, config={"tests": 3})
    src = tmp_path / "code.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = EvalConfig(n=1, ks=(1,), batch_size=2, scoring=ScoringConfig(workers=0))
    job = FilterJob(parse_rule("mean>=0", 1), config, "code_tasks", min_tests=4, model="stub")
    report = filter_file(
        src,
        tmp_path / "kept.jsonl",
        job,
        model=torch.nn.Linear(1, 1),
        tokenizer=CharTokenizer(),
        verifier=get_verifier("code"),
        sampler=KnownSampler(kill_at=0),  # nothing may be sampled
    )
    assert report.kept == 0 and report.dropped == {"too_few_tests": 2}
    dropped = [json.loads(x) for x in report.dropped_file.read_text().splitlines()]
    assert [d["tests"] for d in dropped] == [3, 3]


def test_min_tests_on_a_row_without_code_tests_names_the_row(tmp_path):
    """The error named the example's id ('in-0', counted from 0), not its file and line."""
    config = EvalConfig(n=1, ks=(1,), batch_size=2, scoring=ScoringConfig(workers=0))
    job = FilterJob(parse_rule("mean>=0", 1), config, min_tests=4, model="stub")
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    with pytest.raises(ValueError, match=r"in\.jsonl:1: --min-tests counts code tests, and this"):
        filter_file(
            src,
            tmp_path / "kept.jsonl",
            job,
            model=torch.nn.Linear(1, 1),
            tokenizer=CharTokenizer(),
            verifier=get_verifier("math"),
            sampler=KnownSampler(kill_at=0),
        )


def test_cli_end_to_end_on_the_tiny_model(tmp_path, tiny_model_dir, capsys):
    from rlvr.cli.data import main as data_main

    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in ROWS[:3]))
    out = tmp_path / "kept.jsonl"
    argv = ["filter", str(src), "--model", str(tiny_model_dir), "-n", "2", "--max-tokens", "4"]
    assert data_main([*argv, "--keep", "mean>=0", "--workers", "0", "-o", str(out)]) == 0
    assert "kept 3 of 3" in capsys.readouterr().out
    assert [json.loads(x)["filter"]["n"] for x in out.read_text().splitlines()] == [2, 2, 2]
    with pytest.raises(SystemExit):  # -k: filter keeps by --keep, it reports no pass@k
        data_main([*argv, "--keep", "mean>=0", "-k", "2", "-o", str(out)])


class RandomSampler(KnownSampler):
    """Each completion right or wrong by a draw of the torch RNG, in batch order: what a
    prompt gets depends on the seed and on its place in the batch, as with a real sampler."""

    def generate(self, prompt_ids, *, n, sampling):
        out = super().generate(prompt_ids, n=n, sampling=sampling)
        out.texts[:] = ["\\boxed{7}" if torch.rand(()) < 0.5 else "\\boxed{0}" for _ in out.texts]
        return out


def _records(tmp_path):
    lines = passrates_file(tmp_path / "kept.jsonl").read_text().splitlines()[1:]
    return {r["id"]: r["scores"] for r in map(json.loads, lines)}


def test_a_changed_row_is_sampled_again_and_an_unchanged_one_is_not(tmp_path):
    _run(tmp_path, "mean>=0.5", KnownSampler())
    changed = [*ROWS[:4], {**ROWS[4], "answer": "0"}]  # q4's completions all say 7
    again = KnownSampler()
    _run(tmp_path, "mean>=0.5", again, rows=changed)
    assert again.sampled == ["q4"]
    assert _ids(tmp_path / "kept.jsonl") == ["p2", "p3"]
    moved = KnownSampler()  # the same rows in another order: nothing to sample
    _run(tmp_path, "mean>=0.5", moved, rows=changed[::-1])
    assert moved.sampled == [] and _ids(tmp_path / "kept.jsonl") == ["p3", "p2"]


def test_other_verifier_options_are_refused(tmp_path):
    _run(tmp_path, "mean>=0.5", KnownSampler())
    same = KnownSampler()
    _run(tmp_path, "mean>=0.5", same, verifier=get_verifier("math", extract="strict"))
    assert same.sampled == []  # the default, named
    wrong = get_verifier("math", wrong=-1.0)
    with pytest.raises(ValueError, match=r"other settings \(verifier.options.wrong: 0.0 there"):
        _run(tmp_path, "mean>=0.5", KnownSampler(), verifier=wrong)
    flexible = get_verifier("math", extract="flexible")
    with pytest.raises(ValueError, match="verifier.options.extract: 'strict' there, 'flexible'"):
        _run(tmp_path, "mean>=0.5", KnownSampler(), verifier=flexible)


def test_another_number_of_scoring_workers_reuses_the_scores(tmp_path):
    """How many score at once does not change a score (pipelines.md lets `workers` change)."""
    _run(tmp_path, "mean>=0.5", KnownSampler())
    again = KnownSampler()
    _run(tmp_path, "mean>=0.5", again, workers=2)
    assert again.sampled == []


def test_other_format_options_are_refused(tmp_path):
    _run(tmp_path, "mean>=0", KnownSampler(), verifier=get_verifier("math+format"))
    stricter = get_verifier("math+format", format_penalty=-1.0)
    with pytest.raises(ValueError, match="verifier.options.penalty: None there, -1.0 now"):
        _run(tmp_path, "mean>=0", KnownSampler(), verifier=stricter)


def test_scores_keyed_the_earlier_way_are_refused(tmp_path):
    scores = passrates_file(tmp_path / "kept.jsonl")
    scores.write_text(json.dumps({"settings": {}}) + "\n" + json.dumps({"key": "0:in-0"}) + "\n")
    with pytest.raises(ValueError, match="keyed by row number and id.*delete the file"):
        _run(tmp_path, "mean>=0.5", KnownSampler())


def test_a_batch_cut_in_the_middle_samples_what_an_uninterrupted_run_did(tmp_path):
    whole = tmp_path / "whole"
    whole.mkdir()
    _run(whole, "mean>=0.5", RandomSampler(), n=8)
    _run(tmp_path, "mean>=0.5", RandomSampler(), n=8)
    scores = passrates_file(tmp_path / "kept.jsonl")
    lines = scores.read_text().splitlines(keepends=True)
    scores.write_text("".join(lines[:4]))  # settings, batch [p0 p1], p2 of batch [p2 p3]
    again = RandomSampler()
    _run(tmp_path, "mean>=0.5", again, n=8)
    assert again.sampled == ["q2", "q3", "q4"]  # [p2 p3] sampled whole, with its seed
    assert _records(tmp_path) == _records(whole)
    assert (tmp_path / "kept.jsonl").read_text() == (whole / "kept.jsonl").read_text()


def test_other_field_names_are_mapped(tmp_path):
    from rlvr.evaluation.data_steps import FilterOptions

    rows = [{"id": r["id"], "question": r["prompt"], "solution": r["answer"]} for r in ROWS]
    options = FilterOptions(keep="mean>=0.5", prompt_field="question", answer_field="solution")
    _run(tmp_path, "mean>=0.5", KnownSampler(), rows=rows, fields=options.field_map())
    assert _ids(tmp_path / "kept.jsonl") == ["p2", "p3", "p4"]
    with pytest.raises(ValueError, match="not both"):
        FilterOptions(keep="mean>0", fields="default", prompt_field="question")


def test_rows_as_rlvr_data_gen_writes_them_need_no_fields(tmp_path):
    """`rlvr data filter gen.jsonl` stopped on "missing field 'prompt'" until `--fields
    reasoning_gym` was given, where training on the same file needs none."""
    from rlvr.evaluation.filtering import read_input

    source = tmp_path / "gen.jsonl"
    row = {"id": "chain_sum-0-0", "question": "1 + 2 =", "answer": "3",
           "metadata": {"source_dataset": "chain_sum", "source_index": 0}}  # fmt: skip
    source.write_text(json.dumps(row) + "\n")
    _, (example,) = read_input(source, "default")
    assert (example.prompt, example.reference) == ("1 + 2 =", row)
    plain = tmp_path / "plain.jsonl"  # a question/answer file is not taken for one
    plain.write_text(json.dumps({"id": "q1", "question": "1 + 2 =", "answer": "3"}) + "\n")
    with pytest.raises(ValueError, match="prompt"):
        read_input(plain, "default")


def test_a_bad_row_fails_before_the_model_loads(tmp_path, capsys):
    from rlvr.cli.data import main as data_main

    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"question": "q1", "answer": "7"}) + "\n")
    missing = tmp_path / "no-such-model"
    argv = ["filter", str(src), "--model", str(missing), "--keep", "mean>0"]
    assert data_main([*argv, "-o", str(tmp_path / "kept.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "missing field 'prompt'" in err and "--prompt-field" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]
    assert data_main([*argv, "--prompt-field", "question", "-o", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


def test_an_unwritable_output_folder_fails_before_the_model_loads(tmp_path, capsys, monkeypatch):
    """It failed only when the first batch's scores were recorded: after the model had loaded
    and sampled (minutes on a real model). The tests run as root, who may write anywhere, so
    the folder's permission is what ``os.access`` answers."""
    import os

    from rlvr.cli.data import main as data_main

    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"prompt": "q1", "answer": "7"}) + "\n")
    folder = tmp_path / "read-only"
    folder.mkdir()
    access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: Path(p) != folder and access(p, mode))
    argv = ["filter", str(src), "--model", "no-such-model", "--keep", "mean>0"]
    assert data_main([*argv, "-o", str(folder / "kept.jsonl")]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == f"rlvr: error: output {folder / 'kept.jsonl'}: {folder} is not writable"


def test_filter_help_suggests_the_rule_it_explains(capsys):
    from rlvr.cli.data import main as data_main

    with pytest.raises(SystemExit):
        data_main(["filter", "--help"])
    out = capsys.readouterr().out
    assert "'mean>0.5'" in out and "pass@16>0.5" not in out and " -k " not in out


def test_a_bad_input_is_one_line_with_no_progress_bar_before_it(tmp_path, capsys):
    """The bar starts when sampling does: an input refused before the model loads prints only
    its error line (an empty 'filter 0/?' bar was printed before it)."""
    from rlvr.cli.data import main as data_main

    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"query": "q0", "answer": "7"}) + "\n")
    argv = ["filter", str(src), "--model", "no-such-model", "--keep", "mean>0.5"]
    assert data_main([*argv, "-o", str(tmp_path / "kept.jsonl")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith("rlvr: error: ") and "missing field 'prompt'" in line


def test_a_code_problem_whose_tests_cannot_be_read_is_refused_naming_its_row(tmp_path):
    """It was scored 0 as a verifier error for every completion and kept by 'mean<1' as if
    measured (docs/data.md: every row is read and checked before the model loads)."""
    rows = [
        {"prompt": "print 3", "answer": {"inputs": ["\n"], "outputs": ["3\n"]}},
        {"prompt": "print 4", "answer": {"inputs": ["\n"], "outputs": []}},
    ]
    with pytest.raises(ValueError, match=r"in\.jsonl:2: reference: 1 inputs and 0 outputs"):
        _run(tmp_path, "mean<1", KnownSampler(kill_at=0), rows=rows, verifier=get_verifier("code"))
    assert not passrates_file(tmp_path / "kept.jsonl").exists()  # nothing sampled


def _refuses_sevens(completion, reference, *, correct=1.0, wrong=0.0):
    if "7" in completion:
        raise RuntimeError("the verifier broke")
    return wrong


def test_the_summary_counts_completions_that_could_not_be_verified(tmp_path):
    """A verifier that raises scores the completion as wrong; the summary says how many, not
    only the scores file (here every ``\\boxed{7}``: 0 + 1 + 2 + 3 + 4 of 20)."""
    from rlvr.rewards import register

    register("refuses_sevens_test")(_refuses_sevens)
    report = _run(tmp_path, "mean>=0", KnownSampler(), verifier=get_verifier("refuses_sevens_test"))
    assert (report.unverified, report.completions) == (10, 20)
    assert "; 10 of 20 completions could not be verified (error or timeout" in report.summary()
    clean = _run(tmp_path, "mean>=0", KnownSampler(), out="clean.jsonl")
    assert clean.unverified == 0 and "could not be verified" not in clean.summary()


def test_filtering_filtered_rows_keeps_the_earlier_result(tmp_path):
    """A second filter (another model, another rule) replaced the rows' ``filter`` field from
    the first without a word; the earlier results now move to ``earlier_filters`` (oldest
    first), and each result names the model and rule that gave it."""
    _run(tmp_path, "mean>=0.25", KnownSampler(), out="first.jsonl")
    first = [json.loads(x) for x in (tmp_path / "first.jsonl").read_text().splitlines()]
    assert first[0]["filter"]["model"] == "stub" and first[0]["filter"]["rule"] == "mean>=0.25"
    _run(tmp_path, "mean>=0.5", KnownSampler(), out="second.jsonl", rows=first)
    second = [json.loads(x) for x in (tmp_path / "second.jsonl").read_text().splitlines()]
    assert [r["id"] for r in second] == ["p2", "p3", "p4"]
    assert [r["earlier_filters"] for r in second] == [[r["filter"]] for r in first[1:]]
    assert second[0]["filter"]["rule"] == "mean>=0.5" and "earlier_filters" not in first[0]
    _run(tmp_path, "mean>=0.75", KnownSampler(), out="third.jsonl", rows=second)
    third = [json.loads(x) for x in (tmp_path / "third.jsonl").read_text().splitlines()]
    rules = [f["rule"] for f in third[0]["earlier_filters"]]
    assert rules == ["mean>=0.25", "mean>=0.5"] and third[0]["filter"]["rule"] == "mean>=0.75"
    clash = [{**row, "earlier_filters": "mine"} for row in ROWS]
    with pytest.raises(ValueError, match=r"in\.jsonl:1: field 'earlier_filters' is 'mine'"):
        _run(tmp_path, "mean>=0.5", KnownSampler(), out="fourth.jsonl", rows=clash)


class ClosingSampler(KnownSampler):
    """:class:`KnownSampler` made by name, recording that it was released."""

    made: list = []  # noqa: RUF012 (one list for the test)

    def __init__(self, model, tokenizer, options) -> None:
        super().__init__()
        self.closed = False
        ClosingSampler.made.append(self)

    def close(self) -> None:
        self.closed = True


def test_a_filter_samples_with_the_sampler_its_job_names_and_records_it(tmp_path):
    """A filter sampled with the lean sampler only; the job names one (``rlvr data filter
    --sampler``, a stage's ``sampler=``), made once for every batch and released after, and
    the scores record it: scores sampled with another sampler are not resumed."""
    from rlvr.generation import SAMPLERS, register_sampler

    register_sampler("filter_known")(ClosingSampler)
    ClosingSampler.made.clear()
    try:
        _run(tmp_path, "mean>=0.5", None, named="filter_known")
        [made] = ClosingSampler.made
        assert made.calls == 3 and made.closed  # batches of 2 of 5 prompts, one sampler
        assert _ids(tmp_path / "kept.jsonl") == ["p2", "p3", "p4"]
        head = json.loads(passrates_file(tmp_path / "kept.jsonl").read_text().splitlines()[0])
        assert head["settings"]["sampler"] == {"name": "filter_known", "options": {}}
        with pytest.raises(
            ValueError, match=r"other settings \(sampler.name: 'filter_known' there"
        ):
            _run(tmp_path, "mean>=0.5", KnownSampler())
    finally:
        SAMPLERS.pop("filter_known")


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_a_filter_sampler_without_its_package_stops_before_the_model_loads(tmp_path, capsys):
    from rlvr.cli.data import main as data_main

    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    argv = ["filter", str(src), "--model", "no-such-model", "--keep", "mean>0.5"]
    assert data_main([*argv, "--sampler", "vllm", "-o", str(tmp_path / "kept.jsonl")]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("rlvr: error: --sampler vllm: the vllm sampler needs vLLM: ")


def test_scores_sampled_with_lean_options_are_not_resumed_without_them():
    """`rlvr data filter --sampler-option draw=multinomial` recorded no sampler (lean was left
    out for files written before samplers were chosen), so a rerun without the option took up
    scores of other tokens; lean's options given are now recorded, lean without any is not."""
    from rlvr.evaluation.filtering import _settings

    config = EvalConfig(n=N, ks=(1,), batch_size=2, scoring=ScoringConfig(workers=0))
    rule, verifier = parse_rule("mean>=0.5", N), get_verifier("math")
    plain = _settings(FilterJob(rule, config, model="stub"), verifier)
    options = {"draw": "multinomial"}
    drawn = _settings(FilterJob(rule, config, model="stub", sampler_options=options), verifier)
    assert "sampler" not in plain
    assert drawn == {**plain, "sampler": {"name": "lean", "options": options}}
