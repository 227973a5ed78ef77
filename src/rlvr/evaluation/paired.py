"""Two evaluations of the same problems, compared problem by problem.

For each problem ``i`` both evaluations give a value (``avg@k``: ``c_i / n_i``; ``pass@k``: the
unbiased estimate from ``n_i`` and ``c_i``; ``maj@k``, when both reports hold each completion's
answer key: :func:`~rlvr.evaluation.majority.maj_at_k`), and ``d_i = new_i - base_i``. The difference of a
metric is ``mean(d)`` with the Student-t interval over problems,
``mean(d) -+ t(P - 1) * sd(d) / sqrt(P)``: pairing by problem removes the problems'
difficulty from the comparison, so it is far tighter than the two reports' standard errors
side by side.

What it does not cover: the interval resamples problems and completions, not training. Two
checkpoints of two runs differ by their seeds as well as by their methods; a difference
between methods needs several seeds per method (``rlvr compare``, docs/compare.md).
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from scipy.stats import t as student_t

from rlvr.evaluation.majority import maj_at_k
from rlvr.evaluation.metrics import pass_at_k

LEVEL = 0.95


class Difference(NamedTuple):
    """One metric's paired difference (new minus base) over problems."""

    mean: float
    low: float
    """Lower end of the interval at :data:`LEVEL`."""
    high: float
    p: float
    """Two-sided p-value of no difference (paired t test)."""
    problems: int


def paired_differences(
    new: Mapping[str, Any], base: Mapping[str, Any], ks: Sequence[int] = ()
) -> dict[str, Difference]:
    """``avg@k`` and ``pass@k`` differences of two ``rlvr eval`` reports (their JSON: problems
    with ``dataset``, ``id``, ``reference``, ``n``, ``c``), ``k`` the smaller ``n`` of a problem
    (``avg@k`` is the share correct whatever ``k``; ``pass@1`` is ``avg@k``, left out); each of
    ``ks`` up to that ``n`` adds its own ``avg@k`` and ``pass@k`` (the keys of
    :func:`~rlvr.evaluation.metrics.summarize`, as a run's held-out scores hold them). Where
    every problem of both holds its completions' answer keys (``answers``), each ``k`` adds
    ``maj@k`` too.

    ``ValueError`` when they scored with other verifiers or hold other problems.

    >>> one = {"verifier": "math", "problems": [
    ...     {"dataset": "d", "id": str(i), "reference": "1", "n": 2, "c": c} for i, c in enumerate([2, 1, 1, 0])]}
    >>> two = {**one, "problems": [{**p, "c": 1} for p in one["problems"]]}
    >>> d = paired_differences(one, two)["avg@2"]
    >>> (d.mean, d.problems, round(d.high, 3))
    (0.0, 4, 0.65)
    >>> list(paired_differences(one, two, ks=[1, 4]))
    ['avg@2', 'pass@2', 'avg@1', 'pass@1']
    """
    pairs = _checked_pairs(new, base)
    out = _differences(pairs)
    n = min(min(a["n"], b["n"]) for a, b in pairs)
    for k in (k for k in ks if 1 <= k <= n and f"pass@{k}" not in out):
        out[f"avg@{k}"] = out[f"avg@{n}"]  # the share correct, whatever k
        out[f"pass@{k}"] = _pass_difference(pairs, k)
        if _voted(pairs) and f"maj@{k}" not in out:
            out[f"maj@{k}"] = _maj_difference(pairs, k)
    return out


class Comparison(NamedTuple):
    """Two reports' paired differences, over all problems and over each dataset's."""

    overall: dict[str, Difference]
    per_dataset: dict[str, dict[str, Difference]]
    """By dataset name, each over that dataset's problems."""


def compare_reports(new: Mapping[str, Any], base: Mapping[str, Any]) -> Comparison:
    """:func:`paired_differences` over all problems and over each dataset's, from one check
    and pairing of the two reports."""
    pairs = _checked_pairs(new, base)
    by_dataset: dict[str, list[tuple[dict, dict]]] = {}
    for a, b in pairs:
        by_dataset.setdefault(a["dataset"], []).append((a, b))
    datasets = {name: _differences(ones) for name, ones in by_dataset.items()}
    return Comparison(_differences(pairs), datasets)


def _checked_pairs(new: Mapping[str, Any], base: Mapping[str, Any]) -> list[tuple[dict, dict]]:
    """The two reports' problems paired; ``ValueError`` for other verifiers or problems; a
    warning for each sampling setting they differ in (:func:`warn_other_settings`)."""
    check_same_scoring(new, base)
    _warn_other_time_limits(new, base)
    pairs = paired_problems(new["problems"], base["problems"])
    warn_other_settings(new, base)
    return pairs


class Setting(NamedTuple):
    """A setting a report records that changes its scores with the same model."""

    name: str
    """As the warning names it."""
    path: tuple[str, ...]
    """Where the report's JSON holds it."""
    draw: bool = False
    """It changes which completions are drawn, not what they are drawn from (the seed):
    a difference of it is noise the paired interval covers, not a cause of the difference."""


SETTINGS = (
    Setting("temperature", ("config", "sampling", "temperature")),
    Setting("top_p", ("config", "sampling", "top_p")),
    Setting("top_k", ("config", "sampling", "top_k")),
    Setting("max new tokens", ("config", "sampling", "max_new_tokens")),
    Setting("system prompt", ("config", "system_prompt")),
    Setting("prompt template", ("loading", "template")),
    Setting("chat template", ("prompts", "chat_template")),
    Setting("prompt token ids (sha256)", ("prompts", "token_ids_sha256")),
    Setting("sampler", ("sampler", "name")),
    Setting("sampler options", ("sampler", "options")),
    Setting("dtype", ("loading", "dtype")),
    Setting("autocast", ("loading", "autocast")),
    Setting("device", ("loading", "device")),
    Setting("seed", ("config", "seed"), draw=True),
    Setting("samples per problem", ("config", "n"), draw=True),
    Setting("batch size", ("config", "batch_size"), draw=True),
)
"""The settings :func:`other_settings` compares, as ``rlvr eval`` and a run's evaluation
reports record them (docs/evaluation.md). A setting is one row here, nowhere else."""


class OtherSetting(NamedTuple):
    """A setting two reports recorded with other values."""

    setting: Setting
    new: Any
    base: Any


_UNRECORDED = object()


def other_settings(new: Mapping[str, Any], base: Mapping[str, Any]) -> list[OtherSetting]:
    """Each of :data:`SETTINGS` that both reports record, with other values (a report written
    before a setting was recorded passes for it).

    >>> one = {"config": {"seed": 0, "sampling": {"temperature": 1.0}}}
    >>> [(o.setting.name, o.new, o.base) for o in other_settings(one, {"config": {"seed": 0}})]
    []
    >>> two = {"config": {"seed": 1, "sampling": {"temperature": 0.6}}}
    >>> [(o.setting.name, o.new, o.base) for o in other_settings(one, two)]
    [('temperature', 1.0, 0.6), ('seed', 0, 1)]
    """
    out = []
    for setting in SETTINGS:
        values = [_recorded(report, setting.path) for report in (new, base)]
        if _UNRECORDED not in values and values[0] != values[1]:
            out.append(OtherSetting(setting, *values))
    return out


def _recorded(report: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    """The value at ``path`` in a report's JSON, or :data:`_UNRECORDED`."""
    value: Any = report
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            return _UNRECORDED
        value = value[key]
    return value


def _against(other: OtherSetting) -> str:
    """``temperature 1.0 against 0.6``: the setting, the new report's value and the base's."""
    return f"{other.setting.name} {shown(other.new)} against {shown(other.base)}"


def warn_other_settings(new: Mapping[str, Any], base: Mapping[str, Any]) -> None:
    """One warning for each setting (not the seed's kind, :attr:`Setting.draw`) that the
    reports recorded with other values: part of their difference may be that."""
    for other in other_settings(new, base):
        if not other.setting.draw:
            warnings.warn(
                f"the reports were sampled differently: {_against(other)}; part of the "
                "difference may be that",
                stacklevel=4,
            )


def shown(value: Any, width: int = 60) -> str:
    """A setting's value for a line: text quoted, ``None`` as ``none``, a digest's first 12
    characters, anything longer than ``width`` cut.

    >>> shown(None), shown(0.6), shown("Be brief."), shown("ab" * 32)
    ('none', '0.6', "'Be brief.'", 'abababababab')
    """
    if value is None:
        return "none"
    if _is_digest(value):
        return value[:12]
    text = repr(value) if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


class Arms(NamedTuple):
    """What two reports compare besides their problems: the weights and the settings."""

    same_weights: bool | None
    """Whether both evaluated the same weights (their ``weights.sha256``,
    :func:`rlvr.models.fingerprint.weights_sha256`); ``None``: either does not record it."""
    digest: str | None
    """The new report's ``weights.sha256``."""
    settings: list[OtherSetting]
    """The settings they recorded with other values (:func:`other_settings`)."""

    @property
    def noise_only(self) -> bool:
        """The same weights sampled the same way, but perhaps for the seed's kind of setting:
        a difference is sampling noise, not a finding."""
        return bool(self.same_weights) and all(o.setting.draw for o in self.settings)

    def line(self) -> str | None:
        """What the difference of the same weights' reports measures; ``None`` for others.

        >>> print(Arms(True, "ab" * 32, []).line())  # doctest: +NORMALIZE_WHITESPACE
        both reports evaluated the same weights (abababababab) the same way, so any
        difference is sampling noise (seed) and not a difference of models
        """
        if not self.same_weights:
            return None
        same = f"both reports evaluated the same weights ({shown(self.digest)})"
        if not self.noise_only:
            return f"{same} sampled otherwise: the difference is the settings', not the models'"
        if not self.settings:
            return (
                f"{same} the same way, so any difference is sampling noise (seed) and not a "
                "difference of models"
            )
        but = ", ".join(_against(o) for o in self.settings)
        return (
            f"{same} the same way but for the {but}: the difference measures sampling noise "
            "(a noise floor), not a difference of models"
        )


def arms(new: Mapping[str, Any], base: Mapping[str, Any]) -> Arms:
    """:class:`Arms` of two reports (``new``'s weights first)."""
    digests = [_recorded(report, ("weights", "sha256")) for report in (new, base)]
    known = _UNRECORDED not in digests and None not in digests
    same = digests[0] == digests[1] if known else None
    return Arms(same, digests[0] if known else None, other_settings(new, base))


def _warn_other_time_limits(new: Mapping[str, Any], base: Mapping[str, Any]) -> None:
    """Warn when the reports' verifiers ran under other time limits (``config.scoring.timeout_s``,
    ``--timeout``) and a completion of either timed out: a timeout counts as wrong, so part of
    the difference may be the limits'. Reports that do not record a limit pass."""
    limits = [_recorded(r, ("config", "scoring", "timeout_s")) for r in (new, base)]
    timed_out = [_count(_recorded(r, ("metrics", "verifier/timeouts"))) for r in (new, base)]
    if _UNRECORDED not in limits and limits[0] != limits[1] and any(timed_out):
        warnings.warn(
            f"the reports were scored under other verifier time limits ({limits[0]} s and "
            f"{limits[1]} s; {timed_out[0]} and {timed_out[1]} completions timed out, counted "
            "wrong): part of the difference may be the limits'",
            stacklevel=3,
        )


def _count(value: Any) -> int:
    """A recorded count as a whole number (0 when it is not recorded or no number)."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return int(value) if number and math.isfinite(value) else 0


def check_same_scoring(new: Mapping[str, Any], base: Mapping[str, Any]) -> None:
    """``ValueError`` unless two reports' verifiers (``verifier`` and ``verifier_options``)
    decide correctness alike: the same spec, and the same options but ``correct`` and
    ``wrong``, which scale scores while avg@k and pass@k count the completions reaching
    ``correct`` (``extract: flexible`` against the default ``strict`` differs)."""
    spec = new.get("verifier")
    if spec != base.get("verifier"):
        raise ValueError(
            f"scored with verifier {spec!r} and {base.get('verifier')!r}: "
            "a difference of two verifiers' scores says nothing of the models"
        )
    if _deciding(spec, new) != _deciding(spec, base):
        raise ValueError(
            f"verifier options {new.get('verifier_options') or {}} (new) and "
            f"{base.get('verifier_options') or {}} (base) decide correctness otherwise"
        )


def _deciding(spec: str, report: Mapping[str, Any]) -> dict:
    """What of the report's verifier decides correctness: its settings with every option
    (defaults included) but the scores ``correct`` and ``wrong``, at every level."""
    from rlvr.evaluation.filtering import verifier_settings
    from rlvr.rewards.registry import get_verifier

    options = report.get("verifier_options") or {}
    try:
        settings = verifier_settings(get_verifier(spec, **options))
    except (TypeError, ValueError) as err:
        raise ValueError(f"verifier {spec!r} with its verifier_options {options}: {err}") from None
    return _without_scores(settings)


def _without_scores(settings: dict) -> dict:
    options = {
        key: _without_scores(value) if isinstance(value, dict) and "spec" in value else value
        for key, value in settings["options"].items()
        if key not in ("correct", "wrong")
    }
    return {"spec": settings["spec"], "options": options}


def _differences(pairs: Sequence[tuple[dict, dict]]) -> dict[str, Difference]:
    """avg@k, (``k > 1``) pass@k and (both voting) maj@k differences of paired problems, ``k``
    the smaller ``n``."""
    k = min(min(a["n"], b["n"]) for a, b in pairs)
    out = {f"avg@{k}": _difference([a["c"] / a["n"] - b["c"] / b["n"] for a, b in pairs])}
    if k > 1:
        out[f"pass@{k}"] = _pass_difference(pairs, k)
    if _voted(pairs):
        out[f"maj@{k}"] = _maj_difference(pairs, k)
    return out


def _voted(pairs: Sequence[tuple[dict, dict]]) -> bool:
    """Whether every problem of both sides holds an answer key and a verdict per completion."""
    return all(
        len(p.get("answers") or ()) == len(p.get("correct") or ()) == p["n"]
        for pair in pairs
        for p in pair
    )


def _maj_difference(pairs: Sequence[tuple[dict, dict]], k: int) -> Difference:
    """The ``maj@k`` difference of paired problems (each side's exact expectation)."""
    return _difference(
        [
            maj_at_k(a["answers"], a["correct"], k) - maj_at_k(b["answers"], b["correct"], k)
            for a, b in pairs
        ]
    )


def _pass_difference(pairs: Sequence[tuple[dict, dict]], k: int) -> Difference:
    """The ``pass@k`` difference of paired problems (each side's unbiased estimate)."""
    return _difference(
        [pass_at_k(a["n"], a["c"], k) - pass_at_k(b["n"], b["c"], k) for a, b in pairs]
    )


def read_report(path: str | Path) -> dict[str, Any]:
    """An ``rlvr eval`` JSON report, its problems checked; one line when it is none."""
    if Path(path).is_dir():
        raise ValueError(f"{path}: is a directory; name an rlvr eval report (a .json file)")
    if not Path(path).exists():
        raise ValueError(f"{path}: no such file")
    try:
        report = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: not an rlvr eval report ({err})") from None
    problems = report.get("problems") if isinstance(report, dict) else None
    keys = ("dataset", "id", "reference", "n", "c")
    if not problems or not all(isinstance(p, dict) and all(k in p for k in keys) for p in problems):
        raise ValueError(f"{path}: not an rlvr eval report (no problems with n and c)")
    if not isinstance(report.get("verifier"), str):
        raise ValueError(f"{path}: not an rlvr eval report (no verifier)")
    bad = next((p for p in problems if not _well_formed(p)), None)
    if bad is not None:
        shown = {k: bad[k] for k in ("dataset", "id", "n", "c")}
        raise ValueError(
            f"{path}: not an rlvr eval report (a problem whose dataset and id are not text or "
            f"whose counts are not 0 <= c <= n, n >= 1: {json.dumps(shown)})"
        )
    bad = next((p for p in problems if not _votes_well_formed(p)), None)
    if bad is not None:
        shown = {k: bad[k] for k in ("dataset", "id", "n")}
        raise ValueError(
            f"{path}: not an rlvr eval report (a problem whose answers are not one text or null "
            f"per sample, or whose correct not one true or false per sample: {json.dumps(shown)})"
        )
    if (wrong := _misshapen(report)) is not None:
        raise ValueError(f"{path}: not an rlvr eval report ({wrong})")
    return report


_SECTIONS = (
    ("config",),
    ("config", "sampling"),
    ("config", "scoring"),
    ("loading",),
    ("weights",),
    ("prompts",),
    ("sampler",),
    ("metrics",),
    ("verifier_options",),
)
"""The parts of a report that are JSON objects when it records them (a report written
before one was recorded passes without it)."""


def _misshapen(report: Mapping[str, Any]) -> str | None:
    """What in a report that :func:`other_settings` and :func:`arms` read has another shape
    than ``rlvr eval`` writes (a hand-edited report), else ``None``: a section of
    :data:`_SECTIONS` that is no object, a ``weights.sha256`` that is no sha256 digest.

    >>> _misshapen({"config": {"sampling": "hot"}})
    "'config.sampling' is a string, not an object"
    >>> _misshapen({"weights": {"sha256": 5}})
    "'weights.sha256' is 5, not a sha256 digest (64 hex digits) or null"
    """
    for path in _SECTIONS:
        value = _recorded(report, path)
        if value is not _UNRECORDED and not isinstance(value, dict):
            return f"{'.'.join(path)!r} is {_json_type(value)}, not an object"
    digest = _recorded(report, ("weights", "sha256"))
    if digest is _UNRECORDED or digest is None or _is_digest(digest):
        return None
    return f"'weights.sha256' is {shown(digest)}, not a sha256 digest (64 hex digits) or null"


def _json_type(value: Any) -> str:
    """What JSON calls ``value``'s type: ``a string``, ``an array``, ``null``, ..."""
    if value is None:
        return "null"
    kinds = ((bool, "a boolean"), (str, "a string"), (list, "an array"), ((int, float), "a number"))
    return next((name for kind, name in kinds if isinstance(value, kind)), "an object")


def _is_digest(value: Any) -> bool:
    """Whether ``value`` is a sha256 hex digest (64 lower-case hex digits)."""
    return (
        isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)
    )


def _well_formed(problem: dict[str, Any]) -> bool:
    """Whether a report's problem has text ``dataset`` and ``id`` and whole counts
    ``0 <= c <= n``, ``n >= 1`` (a hand-edited report could fail after sampling otherwise)."""
    n, c = problem["n"], problem["c"]
    counts = all(isinstance(x, int) and not isinstance(x, bool) for x in (n, c))
    texts = isinstance(problem["dataset"], str) and isinstance(problem["id"], str)
    return texts and counts and 0 <= c <= n and n >= 1


def _votes_well_formed(problem: dict[str, Any]) -> bool:
    """Whether a problem's ``answers`` (when given: none, or one answer key, text or null, per
    sample) and ``correct`` (when given: one true or false per sample) can vote in maj@k (a
    hand-edited list of objects stopped maj@k with a ``TypeError`` after sampling)."""
    n, answers, correct = problem["n"], problem.get("answers", []), problem.get("correct", [])
    keys = isinstance(answers, list) and len(answers) in (0, n)
    keys = keys and all(a is None or isinstance(a, str) for a in answers)
    verdicts = isinstance(correct, list) and len(correct) in (0, n)
    return keys and verdicts and all(isinstance(c, bool) for c in correct)


def summary(differences: Mapping[str, Difference], tested: bool = True) -> str:
    """The differences in percentage points, as ``rlvr eval --against`` prints them; without
    ``tested``, no p-value (a difference of noise alone tests nothing: :attr:`Arms.noise_only`).

    >>> summary({"avg@4": Difference(0.012, -0.003, 0.027, 0.12, 500)})
    'avg@4 +1.2 [-0.3, +2.7] p 0.12'
    >>> summary({"avg@4": Difference(0.012, -0.003, 0.027, 0.12, 500)}, tested=False)
    'avg@4 +1.2 [-0.3, +2.7]'
    """
    parts = []
    for name, d in differences.items():
        part = f"{name} {100 * d.mean:+.1f}"
        if not math.isnan(d.low):
            part += f" [{100 * d.low:+.1f}, {100 * d.high:+.1f}]"
            part += f" p {d.p:.2g}" if tested else ""
        parts.append(part)
    return "; ".join(parts)


def paired_problems(new: Sequence[dict], base: Sequence[dict]) -> list[tuple[dict, dict]]:
    """Each problem of ``new`` with the same one (dataset, id, reference) of ``base``;
    ``ValueError`` unless both hold the same problems."""
    for side, problems in (("new", new), ("base", base)):
        _check_unique(side, problems)
    keyed = {(p["dataset"], p["id"]): p for p in base}
    missing = [p for p in new if (p["dataset"], p["id"]) not in keyed]
    if missing or len(new) != len(base):
        raise ValueError(
            f"the reports hold other problems ({len(new)} and {len(base)}, "
            f"{len(new) - len(missing)} in both): evaluate the same data with the same --limit"
        )
    pairs = [(p, keyed[(p["dataset"], p["id"])]) for p in new]
    other = next((a for a, b in pairs if _json(a["reference"]) != _json(b["reference"])), None)
    if other is not None:
        raise ValueError(
            f"problem {other['dataset']}/{other['id']} has another reference in each report"
        )
    return pairs


def _check_unique(side: str, problems: Sequence[dict]) -> None:
    """``ValueError`` naming the first problem (dataset and id) ``problems`` hold twice."""
    seen: set[tuple[str, str]] = set()
    for p in problems:
        key = (p["dataset"], p["id"])
        if key in seen:
            raise ValueError(
                f"the {side} report names problem {key[0]}/{key[1]} twice (dataset and id): "
                "its problems cannot be paired"
            )
        seen.add(key)


def _json(value: Any) -> str:
    """A reference as its report's JSON holds it (a tuple as a list, a path as text)."""
    return json.dumps(value, sort_keys=True, default=str)


def _difference(d: Sequence[float]) -> Difference:
    """Mean of ``d`` with its Student-t interval and p-value (one problem: no interval)."""
    count, mean = len(d), math.fsum(d) / len(d)
    if count < 2:
        return Difference(mean, math.nan, math.nan, math.nan, count)
    se = math.sqrt(math.fsum((x - mean) ** 2 for x in d) / (count - 1) / count)
    if se == 0:  # every problem moved alike: no spread to test against
        return Difference(mean, mean, mean, 1.0 if mean == 0 else 0.0, count)
    half = float(student_t.ppf(0.5 + LEVEL / 2, count - 1)) * se
    p = float(2 * student_t.sf(abs(mean) / se, count - 1))
    return Difference(mean, mean - half, mean + half, p, count)
