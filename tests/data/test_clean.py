"""dedup and decontaminate on hand-made sets: what is dropped, what is kept, and why."""

import json

import pytest

from rlvr.cli.data import main as data_main
from rlvr.data.contamination import GYM_EVAL_SEED, GYM_EVAL_SIZE, NgramIndex
from rlvr.data.text import normalized, prompt_text, tokens

EVAL = "Let a b c d e f g h i j be ten distinct primes. Find their sum."
# 9 consecutive eval tokens ("c d e f g h i j be"), re-spaced and re-cased
NINE = "Consider C  d e f G h i j BE, then stop."
# 8 consecutive eval tokens ("c d e f g h i j"), then a different word
EIGHT = "Consider c d e f g h i j now, then stop."


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _read(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_tokens_ignore_case_space_latex_spacing_and_punctuation():
    assert tokens(r"Find $\frac{1}{2}\,x^{2}$!") == ["find", r"\frac", "1", "2", "x", "^", "2"]
    assert normalized(r"\left( x \right)\quad+ 1") == normalized("(x)+1") == "( x ) + 1"
    assert normalized("What is 3.5?") != normalized("What is 35?")


def test_latex_line_break_is_one_token_whatever_whitespace_follows():
    r"""``\\`` then a space lost its second backslash (read as a control space ``\ ``) while
    ``\\`` then a new line kept both, so two prompts differing only in layout were not
    duplicates, and a problem copied with its line breaks re-wrapped shared no n-gram."""
    assert tokens("a \\\\ b") == tokens("a \\\\\nb") == tokens("a\\\\b") == ["a", "\\\\", "b"]
    assert normalized("x \\ y") == normalized("x \\\ty") == normalized("x y")  # control space
    assert tokens(r"\\, \\quad") == ["\\\\", "\\\\", "quad"]
    index = NgramIndex(5)
    index.add("eval", "eval.jsonl:1", "a = 1 \\\\\n b = 2")
    assert index.match("a = 1 \\\\ b = 2").ngram == "a = 1 \\\\ b"


def test_latex_escaped_characters_are_read_as_the_character():
    r"""``\$5`` and ``20\%`` (a problem's LaTeX source) gave a lone ``\`` token that ``$5`` and
    ``20%`` (the same problem copied from a rendered page) do not have: no duplicates, and no
    n-gram shared across the amount."""
    source = r"A shirt costs \$25 after a 20\% discount \& tax; find \{x\_1\}."
    rendered = "A shirt costs $25 after a 20% discount & tax; find {x_1}."
    assert normalized(source) == normalized(rendered)
    assert tokens(r"\#3 \\% \\$x$") == ["#", "3", "\\\\", "%", "\\\\", "x"]
    index = NgramIndex(9)
    index.add("eval", "eval.jsonl:1", source)
    assert index.match(rendered).ngram == "a shirt costs 25 after a 20 % discount"


def test_case_is_folded_the_unicode_way():
    """``str.lower`` keeps ``ß`` while upper case writes it ``SS``: "Straße" and its upper-case
    copy "STRASSE" were different prompts."""
    assert normalized("Die Straße ist 5 km lang.") == normalized("DIE STRASSE IST 5 KM LANG")


def test_invisible_format_characters_are_not_tokens():
    """A byte order mark, zero-width space or soft hyphen (invisible: Unicode Cf) was a token of
    its own, so a copy carrying one was no duplicate of the original and a problem with a soft
    hyphen in a word shared no n-gram across it."""
    assert normalized("\ufeffWhat is 2+2?") == normalized("What is 2+2?")
    assert tokens("multi\u00adple\u200b choice \u200eleft") == ["multiple", "choice", "left"]
    index = NgramIndex(9)
    index.add(
        "eval", "eval.jsonl:1", "Find the number of ordered pairs of inte\u00adgers such that"
    )
    hit = index.match("find the number of ordered pairs of integers such that x")
    assert hit.ngram == "find the number of ordered pairs of integers such"


def test_typographic_quotes_separate_tokens_as_straight_ones_do():
    """‘ ’ “ ” were tokens: "Let’s" and "Let's" were different prompts to dedup, and a problem
    copied with curly quotes from a set written with straight ones shared no 9-gram with it."""
    assert normalized("Let’s call “it” Bob’s") == normalized("Let's call \"it\" Bob's")
    index = NgramIndex(9)
    index.add("eval", "eval.jsonl:1", 'Bob\'s "lucky" number is the sum of 7 and 8.')
    hit = index.match("Q: Bob’s “lucky” number is the sum of 7 and 9?")
    assert hit.ngram == "bob s lucky number is the sum of 7"


def test_chinese_and_japanese_characters_are_tokens_of_their_own():
    """A run of Han characters was one token (there are no spaces), so a Chinese problem copied
    whole from an evaluation set shared no 9-gram with it and was kept by decontamination."""
    problem = "求一个正多边形的边数，其内角为150度。"
    assert tokens(problem)[:3] == ["求", "一", "个"] and tokens(problem)[-2:] == ["150", "度"]
    assert tokens("ひらがなとカタカナ、漢字") == list("ひらがなとカタカナ漢字")
    assert tokens("café naïve 한국어") == ["café", "naïve", "한국어"]  # spaced scripts: words
    index = NgramIndex(9)
    index.add("eval", "eval.jsonl:1", problem)
    assert index.match("请回答：" + problem).ngram == "求 一 个 正 多 边 形 的 边"
    assert index.match("正多边形的边长其内角") is None  # one character differs: no 9 in a row

    index = NgramIndex(9)
    index.add("eval", "eval.jsonl:1", EVAL)
    hit = index.match(NINE)
    assert hit is not None
    assert (hit.ngram, hit.set, hit.where) == ("c d e f g h i j be", "eval", "eval.jsonl:1")
    assert index.match(EIGHT) is None
    assert NgramIndex(8).match(EIGHT) is None  # empty index
    eight = NgramIndex(8)
    eight.add("eval", "x", EVAL)
    assert eight.match(EIGHT).ngram == "c d e f g h i j"


def test_index_confirms_hash_hits(monkeypatch):
    """Two different n-grams with the same hash: the prompt is kept."""
    import builtins

    index = NgramIndex(2)
    monkeypatch.setattr(builtins, "hash", lambda gram: 7)
    index.add("eval", "x", "alpha beta")
    assert index.match("beta alpha") is None
    assert index.match("alpha beta").ngram == "alpha beta"


def test_dedup_and_decontaminate_cli(tmp_path, capsys):
    rows = [
        {"id": 1, "prompt": NINE},
        {"id": 2, "prompt": "How many primes are below 10?"},
        {"id": 3, "prompt": "how many  PRIMES are below 10"},
        {"id": 4, "prompt": EIGHT},
        {"id": 5, "prompt": [{"role": "user", "content": "Sum the digits of 2024."}]},
    ]
    src = _write(tmp_path / "train.jsonl", rows)
    evals = _write(tmp_path / "eval.jsonl", [{"problem": "Unrelated."}, {"problem": EVAL}])
    assert data_main(["dedup", str(src), "-o", str(tmp_path / "u.jsonl")]) == 0
    assert "kept 4 of 5 (dropped 1 duplicate)" in capsys.readouterr().out
    assert [r["id"] for r in _read(tmp_path / "u.jsonl")] == [1, 2, 4, 5]
    (dup,) = _read(tmp_path / "u.dropped.jsonl")
    assert (dup["reason"], dup["duplicate_of"], dup["row"]["id"]) == (
        "duplicate",
        f"{src}:2",
        3,
    )
    argv = ["decontaminate", str(tmp_path / "u.jsonl"), "--against", str(evals), "--ngram", "9"]
    assert data_main([*argv, "-o", str(tmp_path / "c.jsonl")]) == 0
    assert "kept 3 of 4 (dropped 1 contaminated)" in capsys.readouterr().out
    assert [r["id"] for r in _read(tmp_path / "c.jsonl")] == [2, 4, 5]
    (bad,) = _read(tmp_path / "c.dropped.jsonl")
    assert bad["ngram"] == "c d e f g h i j be"
    assert (bad["set"], bad["set_where"], bad["row"]["id"]) == (str(evals), f"{evals}:2", 1)


def test_generated_sets_are_trains_held_out_sets():
    """``reasoning_gym:<task>`` as a SET is the held-out set ``rlvr train`` generates."""
    from rlvr.train.config import GymConfig

    assert (GymConfig().eval_size, GymConfig().held_out_seed) == (GYM_EVAL_SIZE, GYM_EVAL_SEED)


def test_chat_rows_are_found_by_their_messages_field(tmp_path, capsys):
    """A chat set (``messages``) needed ``--field messages``: no prompt field was found."""
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": NINE}]
    rows = [
        {"messages": chat},
        {"messages": chat[1:]},
        {"messages": [chat[0], {**chat[1], "content": EIGHT}]},
    ]
    src = _write(tmp_path / "chat.jsonl", rows)
    assert data_main(["dedup", str(src), "-o", str(tmp_path / "u.jsonl")]) == 0
    assert "kept 2 of 3 (dropped 1 duplicate)" in capsys.readouterr().out


def test_chat_content_parts_are_read_as_their_text():
    """A message whose content is a list of parts (``{"type": "text", "text": ...}``) was read
    as the list's Python repr: its words ``type`` and ``text`` became tokens, and each new line
    became a ``\\n...`` command token glued to the next word, so the row was no duplicate of
    the same prompt as a string and shared no n-gram across the line break."""
    parts = [
        {"type": "text", "text": "Find the value\nof x."},
        {"type": "image_url", "image_url": {"url": "x.png"}},
        {"type": "text", "text": "Then stop."},
    ]
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": parts}]
    assert prompt_text(chat) == "Find the value\nof x.\nThen stop."
    assert normalized(prompt_text(chat)) == normalized("Find the value of x, then stop")
    assert prompt_text([{"role": "user", "content": None}, {"role": "user", "content": "hi"}]) == (
        "\nhi"
    )


def test_bad_input_is_one_clear_error(tmp_path):
    src = _write(tmp_path / "t.jsonl", [{"query": "x"}])
    with pytest.raises(ValueError, match="no prompt field"):
        data_main.__wrapped__(["dedup", str(src), "-o", str(tmp_path / "o.jsonl")])
    with pytest.raises(ValueError, match="ngram must be >= 1"):
        NgramIndex(0)


@pytest.mark.parametrize(("name", "kind"), [("unique.csv", "'.csv'"), ("unique", "'none'")])
def test_an_output_the_next_step_could_not_read_is_refused(tmp_path, capsys, name, kind):
    """JSON lines were written to ``-o unique.csv`` or ``-o unique``, which no step reads."""
    src = _write(tmp_path / "t.jsonl", [{"prompt": "what is 1+1"}])
    assert data_main(["dedup", str(src), "-o", str(tmp_path / name)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert f"unsupported file type {kind}" in line and "name a .jsonl or .parquet file" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.jsonl"]  # nothing written


def test_an_evaluation_file_without_a_prompt_field_is_named_with_set_field(tmp_path, capsys):
    """--field names the input's prompt field; the error for an --against file pointed to it."""
    src = _write(tmp_path / "t.jsonl", [{"query": NINE}])
    evals = _write(tmp_path / "e.jsonl", [{"q": EVAL}])
    out = str(tmp_path / "o.jsonl")
    argv = ["decontaminate", str(src), "--field", "query", "-o", out, "--against"]
    assert data_main([*argv, str(evals)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.endswith(
        f"e.jsonl:1: no prompt field (prompt, question, problem, text, messages); name it with {evals}::FIELD"
    )
    assert data_main([*argv, f"{evals}::q"]) == 0


def test_a_missing_named_field_points_to_decontaminates_own_flags(tmp_path, capsys):
    """A field named with --field or SET::FIELD but missing pointed to --prompt-field /
    --answer-field / --fields, flags only `filter` has."""
    src = _write(tmp_path / "t.jsonl", [{"prompt": NINE}])
    evals = _write(tmp_path / "e.jsonl", [{"prompt": EVAL}])
    argv = ["decontaminate", str(src), "-o", str(tmp_path / "o.jsonl"), "--against"]
    for extra in ([f"{evals}::nofield"], [str(evals), "--field", "nofield"]):
        assert data_main([*argv, *extra]) == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert "missing field 'nofield'" in line and "--prompt-field" not in line
        assert line.endswith("--field (the input's) or SET::FIELD (an --against set's)")


def test_an_output_inside_an_evaluation_folder_is_refused(tmp_path, capsys):
    """'--against evals -o evals/test.jsonl' replaced the folder's test split with the kept
    rows (and the dropped rows joined it as a second test file)."""
    src = _write(tmp_path / "t.jsonl", [{"prompt": NINE}])
    evals = tmp_path / "evals"
    evals.mkdir()
    _write(evals / "test.jsonl", [{"problem": EVAL}])
    before = (evals / "test.jsonl").read_text()
    argv = ["decontaminate", str(src), "--against", str(evals), "-o"]
    for out in (evals / "test.jsonl", evals / "sub" / "clean.jsonl"):
        assert data_main([*argv, str(out)]) == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert f"would be written into the input folder {evals}" in line
    assert (evals / "test.jsonl").read_text() == before
    assert sorted(p.name for p in evals.iterdir()) == ["test.jsonl"]


def test_common_one_is_refused_since_it_would_cut_every_ngram(tmp_path, capsys):
    """Every n-gram of a problem is found in 1 or more problems: --common 1 cut them all and
    kept every prompt, a contaminated one included, without a word."""
    src = _write(tmp_path / "t.jsonl", [{"prompt": NINE}])
    evals = _write(tmp_path / "e.jsonl", [{"problem": EVAL}])
    argv = ["decontaminate", str(src), "--against", str(evals), "-o", str(tmp_path / "o.jsonl")]
    assert data_main([*argv, "--common", "1"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("rlvr: error: common=1 cuts every n-gram an evaluation problem has")
    assert not (tmp_path / "o.jsonl").exists()
    assert data_main([*argv, "--common", "2"]) == 0  # one problem: nothing common, NINE dropped
    assert "dropped 1 contaminated" in capsys.readouterr().out


def test_common_ngrams_of_a_template_can_be_cut_out():
    """reasoning-gym's 9-token instruction is in every problem: ``common`` cuts it out."""
    head = "State the final answer to the following arithmetic problem:"
    problems = [f"{head} 1 + 2 + 3 + 4 + 5 =", f"{head} 3 - 4 =", f"{head} 5 + 6 ="]
    literal, cut = NgramIndex(9), NgramIndex(9, common=3)
    for i, text in enumerate(problems):
        literal.add("eval", str(i), text)
        cut.add("eval", str(i), text)
    assert literal.match(f"{head} 7 + 8 =").ngram == normalized(head)
    assert cut.match(f"{head} 7 + 8 =") is None
    assert cut.match(f"{head} 1 + 2 =") is None  # no n-gram straddles the instruction's end
    hit = cut.match(f"Compute {head} 1 + 2 + 3 + 4 + 5 + 6")  # the problem's own 9 tokens
    assert (hit.ngram, hit.where) == ("1 + 2 + 3 + 4 + 5", "0")
    assert len(cut) == 2  # "1 + 2 + 3 + 4 + 5" and "+ 2 + 3 + 4 + 5 ="


def test_common_cuts_join_no_tokens_across_them():
    """With the instruction cut out, the words on its two sides are two pieces, never one n-gram."""
    head = "State the final answer to the following arithmetic problem:"
    words = "one two three four five six seven eight nine"
    around = f"one two three four {head} five six seven eight nine"

    def index(problem):
        made = NgramIndex(9, common=2)
        for i, text in enumerate([f"{head} 1 + 2 =", f"{head} 3 - 4 =", problem]):
            made.add("eval", str(i), text)
        return made

    assert index(words).match(f"So: {words}").ngram == words
    assert index(words).match(around) is None  # the prompt's pieces
    assert index(around).match(words) is None  # the problem's pieces


def test_common_counts_a_problem_and_its_copies_once():
    """A problem in two sets (or a set named twice) counted as two problems, so ``common=2``
    cut all its text out and a prompt copying it whole was kept."""
    head = "State the final answer to the following arithmetic problem:"
    problem = "Alice has seven red apples and gives three of them to Bob today"
    index = NgramIndex(9, common=2)
    for name in ("aime", "heldout"):
        index.add(name, f"{name}.jsonl:1", problem)
        index.add(name, f"{name}.jsonl:2", f"{head} 1 + 2 =")
    index.add("gym", "gym:1", f"{head} 3 - 4 =")
    hit = index.match(f"Q: {problem}!")
    assert (hit.set, hit.where) == ("aime", "aime.jsonl:1")
    assert index.match(f"{head} 5 + 6 =") is None  # the instruction two problems share is cut


def test_dataset_directories_by_path_and_split(tmp_path, monkeypatch):
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    monkeypatch.chdir(tmp_path)
    datasets.Dataset.from_list([{"problem": EVAL}]).save_to_disk(str(tmp_path / "hfdir"))
    (tmp_path / "pqdir").mkdir()
    pq.write_table(pa.Table.from_pylist([{"problem": EVAL}]), tmp_path / "pqdir" / "data.parquet")
    src = _write(tmp_path / "train.jsonl", [{"prompt": NINE}, {"prompt": EIGHT}])
    for against in ("./hfdir", str(tmp_path / "hfdir"), "hfdir"):
        argv = ["decontaminate", str(src), "--against", against, "-o", str(tmp_path / "c.jsonl")]
        assert data_main(argv) == 0, against
        assert [r["prompt"] for r in _read(tmp_path / "c.jsonl")] == [EIGHT]
    argv = ["decontaminate", str(src), "--against", "./pqdir", "-o", str(tmp_path / "c.jsonl")]
    # datasets' own "Unknown split "test". Should be one of ['train']" named no option
    with pytest.raises(ValueError) as err:
        data_main.__wrapped__(argv)
    assert str(err.value) == "pqdir: no split 'test'; its splits: train; name one with --split"
    assert data_main([*argv, "--split", "train"]) == 0
    assert [r["prompt"] for r in _read(tmp_path / "c.jsonl")] == [EIGHT]


def test_a_folder_whose_files_do_not_make_one_table_is_one_line(tmp_path, capsys):
    """Two test files with other columns: datasets' DatasetGenerationError was a traceback."""
    (tmp_path / "evals").mkdir()
    _write(tmp_path / "evals" / "test.jsonl", [{"problem": EVAL}])
    _write(tmp_path / "evals" / "test-2.jsonl", [{"question": EVAL, "other": 1}])
    src = _write(tmp_path / "train.jsonl", [{"prompt": NINE}])
    argv = ["decontaminate", str(src), "--against", str(tmp_path / "evals")]
    assert data_main([*argv, "-o", str(tmp_path / "c.jsonl")]) == 2
    line = capsys.readouterr().err.splitlines()[-1]  # after datasets' own progress lines
    assert line == (
        f"rlvr: error: {tmp_path / 'evals'}: its files have different columns "
        "(test-2.jsonl: question, other; test.jsonl: problem)"
    )
