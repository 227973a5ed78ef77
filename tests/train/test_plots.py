"""The PNG curves of ``metrics.jsonl``: what each line holds."""

from __future__ import annotations

import math
import warnings

import pytest

from rlvr.train.plots import load_runs, plot_runs


@pytest.fixture()
def drawn(monkeypatch):
    """``{panel file name: figure}`` of every figure ``plot_runs`` saves."""
    from matplotlib.figure import Figure

    figures = {}
    save = Figure.savefig

    def capture(self, path, *args, **kwargs):
        figures[path.name] = self
        return save(self, path, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", capture)
    return figures


def _line(figure, label):
    (ax,) = figure.axes
    (line,) = [x for x in ax.get_lines() if x.get_label().startswith(label)]
    return line


def test_a_non_finite_step_is_a_gap_not_bridged(tmp_path, drawn):
    """A step logged as null (a NaN entropy) used to be left out, the line drawn straight across it."""
    entropy = [1.0, None, 0.5, 0.4]
    rows = [{"step": s, "policy/entropy": e} for s, e in enumerate(entropy, start=1)]
    rows.append({"step": 5})  # a step that did not log the metric is no gap
    plot_runs({"run": rows}, tmp_path)
    line = _line(drawn["entropy.png"], "policy/entropy")
    assert list(line.get_xdata()) == [1, 2, 3, 4]
    ys = list(line.get_ydata())
    assert math.isnan(ys[1]) and [ys[0], ys[2], ys[3]] == [1.0, 0.5, 0.4]
    assert "1 non-finite" in line.get_label()


def test_finite_series_keep_their_plain_label(tmp_path, drawn):
    rows = [{"step": s, "reward/mean": 0.1 * s} for s in (1, 2, 3)]
    plot_runs({"run": rows}, tmp_path)
    assert _line(drawn["reward.png"], "reward/mean").get_label() == "reward/mean"


def test_every_panel_labels_both_axes(tmp_path, drawn):
    """The y axes had no label: a reader could not tell reward from share, nats from tokens."""
    from rlvr.train.plots import PANELS

    names = [
        "reward/mean",
        "policy/entropy",
        "clip/frac",
        "clip/q1_share",
        "contrast/grpo/token_frac",
    ]
    names += ["response/length_mean", "eval/avg@4", "sft/loss"]
    rows = [{"step": s, **{name: 0.5 for name in names}} for s in (1, 2)]
    plot_runs({"run": rows}, tmp_path)
    assert sorted(drawn) == sorted(f"{panel}.png" for panel in PANELS)
    for name, figure in drawn.items():
        (ax,) = figure.axes
        assert ax.get_xlabel() == "step" and ax.get_ylabel(), name


def test_the_contrast_panel_has_one_line_per_compared_objective(tmp_path, drawn):
    """Each name in ``log.contrast`` is a line of its token share; its quadrant shares are not."""
    rows = [
        {"step": s, "contrast/grpo/token_frac": 0.01 * s, "contrast/grpo/q1_frac": 0.0}
        | {"contrast/apmpo:fss_form=mean/token_frac": 0.0}
        for s in (1, 2)
    ]
    plot_runs({"run": rows}, tmp_path)
    (ax,) = drawn["contrast.png"].axes
    labels = sorted(line.get_label() for line in ax.get_lines())
    assert labels == ["contrast/apmpo:fss_form=mean/token_frac", "contrast/grpo/token_frac"]
    assert list(_line(drawn["contrast.png"], "contrast/grpo").get_ydata()) == [0.01, 0.02]


def test_several_runs_colour_each_run_and_keep_the_legend_off_the_curves(tmp_path, drawn):
    """With two runs every line took the next colour of the cycle (a run's clip/frac and the
    other run's clip/low_frac could share one), and the legend sat on the curves."""
    names = ("clip/frac", "clip/low_frac", "clip/high_frac")
    rows = [{"step": s, **{n: 0.01 * s for n in names}} for s in (1, 2, 3)]
    plot_runs({"grpo": rows, "abc_grpo": rows}, tmp_path)
    figure = drawn["clip.png"]
    (ax,) = figure.axes
    colours = {
        run: {_line(figure, f"{run}: {n}").get_color() for n in names}
        for run in ("grpo", "abc_grpo")
    }
    assert all(len(c) == 1 for c in colours.values()) and colours["grpo"] != colours["abc_grpo"]
    styles = {run: [_line(figure, f"{run}: {n}").get_linestyle() for n in names] for run in colours}
    assert styles["grpo"] == styles["abc_grpo"] and len(set(styles["grpo"])) == 3
    figure.canvas.draw()
    legend, axes = ax.get_legend().get_window_extent(), ax.get_window_extent()
    assert legend.x0 >= axes.x1


@pytest.mark.parametrize("steps", [(1, 2, 3), (6,)])
def test_steps_are_whole_numbers_on_the_axis(tmp_path, drawn, steps):
    """A held-out panel with only the last step read 5.68, 5.76, ... 6.32."""
    rows = [{"step": s, "reward/mean": 0.1 * s} for s in steps]
    plot_runs({"run": rows}, tmp_path)
    (ax,) = drawn["reward.png"].axes
    drawn["reward.png"].canvas.draw()
    lo, hi = ax.get_xlim()
    ticks = [t for t in ax.get_xticks() if lo <= t <= hi]
    assert ticks and all(float(t).is_integer() for t in ticks)


def test_a_step_without_out_of_band_events_is_no_quadrant_share(tmp_path, drawn):
    """With no events a step logs all four shares as 0; they were drawn there, so every
    share seemed to drop to 0 (a share of no events is no share)."""
    shares = [(0.25, 0.0, 0.25, 0.5), (0.0, 0.0, 0.0, 0.0), (0.0, 0.5, 0.5, 0.0)]
    rows = [
        {"step": s, **{f"clip/q{q}_share": x for q, x in enumerate(row, start=1)}}
        for s, row in enumerate(shares, start=1)
    ]
    plot_runs({"run": rows}, tmp_path)
    line = _line(drawn["quadrants.png"], "clip/q4_share")
    assert list(line.get_xdata()) == [1, 3] and list(line.get_ydata()) == [0.5, 0.0]


def test_runs_with_the_same_folder_name_are_told_apart_by_their_parents(tmp_path):
    """Two studies' ``seed0`` runs were labelled ``seed0`` and ``seed0'``."""
    from rlvr.train.plots import load_runs

    paths = []
    for arm in ("grpo", "abc_grpo"):
        run = tmp_path / arm / "seed0"
        run.mkdir(parents=True)
        (run / "metrics.jsonl").write_text('{"step": 1, "reward/mean": 0.5}\n')
        paths.append(str(run))
    assert list(load_runs(paths)) == ["grpo/seed0", "abc_grpo/seed0"]
    other = tmp_path / "grpo" / "other.jsonl"
    other.write_text('{"step": 1, "reward/mean": 0.5}\n')
    assert list(load_runs([paths[0], str(other)])) == ["seed0", "other"]
    assert list(load_runs([paths[0], paths[0]])) == ["seed0", "seed0'"]


def test_more_than_ten_runs_keep_a_colour_each(tmp_path, drawn):
    """The eleventh run took the first one's colour (the colour cycle has ten)."""
    from matplotlib.colors import to_hex

    rows = [{"step": s, "policy/entropy": 0.1 * s} for s in (1, 2)]
    plot_runs({f"seed{i}": rows for i in range(12)}, tmp_path)
    (ax,) = drawn["entropy.png"].axes
    assert len({to_hex(line.get_color()) for line in ax.get_lines()}) == 12


def test_each_objectives_own_metrics_get_a_figure(tmp_path, drawn):
    """``etr/*``, ``apmpo/*`` and a registered objective's ``mine/*`` were in no figure."""
    etr = [
        {"step": s, "etr/eps_mean": 0.2, "etr/eps_max": 0.1 * s, "reward/mean": 0.5} for s in (1, 2)
    ]
    mine = [{"step": s, "mine/width": 3.0 * s, "policy/entropy": 1.0} for s in (1, 2, 3)]
    written = plot_runs({"etr": etr, "mine": mine}, tmp_path)
    assert {"objective-etr.png", "objective-mine.png"} <= {p.name for p in written}
    assert not any(
        name.startswith("objective-") and name not in {"objective-etr.png", "objective-mine.png"}
        for name in drawn
    )
    axes = drawn["objective-etr.png"].axes
    assert [ax.get_title() for ax in axes] == ["etr/eps_max", "etr/eps_mean"]  # one axes each
    (line,) = axes[0].get_lines()
    assert line.get_label() == "etr: etr/eps_max" and list(line.get_ydata()) == [0.1, 0.2]
    (ax,) = [a for a in drawn["objective-mine.png"].axes if a.get_lines()]
    assert list(ax.get_lines()[0].get_xdata()) == [1, 2, 3]


def test_an_objective_metric_that_is_no_number_is_one_line(tmp_path):
    from rlvr.train.plots import load_runs

    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "mine/width": "wide", "note": "x"}\n')
    with pytest.raises(ValueError, match=r"row 1: mine/width is 'wide', not a number"):
        load_runs([str(tmp_path)])


def test_a_line_that_is_not_json_is_warned_about_and_a_torn_last_one_is_not(tmp_path):
    """A damaged line inside ``metrics.jsonl`` was left out of the plots without a word (as a
    kill's torn last line rightly is)."""
    path = tmp_path / "metrics.jsonl"
    path.write_text(
        '{"step": 1, "reward/mean": 0.5}\nnot json\n{"step": 2, "reward/mean": 0.6}\n{"step": 3'
    )
    with pytest.warns(UserWarning, match=r"1 line\(s\) not JSON \(line 2\), left out of the plots"):
        runs = load_runs([str(path)])
    assert [row["step"] for row in next(iter(runs.values()))] == [1, 2]
    path.write_text('{"step": 1, "reward/mean": 0.5}\n{"step": 2')
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_runs([str(path)])
