"""The GPU confirmation figure draws both confirmation stages from a campaign summary."""

import matplotlib

matplotlib.use("Agg")

from figures import fig_gpu_confirm  # noqa: E402


def _stage(name: str, model: str, shift: float) -> dict:
    diffs = {"ft_up": {"accuracy_points": [1.0 + shift, 0.2, 1.8 + shift],
                       "heldout_loss": [-0.01, -0.02, 0.0]},
             "random": {"accuracy_points": [0.1, -0.5, 0.7]}}  # fmt: skip
    return {
        "name": name,
        "status": "ok",
        "figures": {
            "model": model,
            "n_train": 2000,
            "seeds": [0, 1, 2],
            "avg_accuracy_points": {"ft": [30.0, 31.0, 29.0], "ft_up": [31.0, 32.0, 30.5]},
            "pt_avg_accuracy_points": 20.0,
            "heldout_loss": {"ft": [1.2, 1.21, 1.19], "ft_up": [1.18, 1.2, 1.17]},
            "paired_differences": diffs,
        },
    }


def _summary(second: dict) -> dict:
    return {
        "stages": [_stage("confirm", "scratch", 0.0), second],
        "meta": {"git_commit": "0123456789abcdef"},
        "updated": "2026-11-27T12:00:00",
    }


def test_both_stages_are_drawn_one_row_each():
    fig = fig_gpu_confirm.draw(_summary(_stage("confirm_smollm2", "smollm2", 0.5)), None)
    rows = [fig.axes[0:3], fig.axes[3:6]]
    for (a, _, c), model, m in zip(rows, ("scratch", "smollm2"), (1.0, 1.5), strict=True):
        assert model in a.get_title()
        # panel (c): 3 intervals (ft_up points and nats, random points), ft_up's point first
        ticks = [t.get_text() for t in c.get_yticklabels()]
        assert ticks == ["ft_up (points)", "ft_up (nats)", "random (points)"]
        first = c.lines[0].get_xdata()[0] if c.lines else c.collections[0].get_offsets()[0][0]
        assert first == m


def test_a_rehearsal_stage_without_accuracies_says_why_in_its_row():
    figs = {"model": "smollm2", "rehearsal_only": "carry checked; LoRA on a GPU"}
    rehearsal = {"name": "confirm_smollm2", "status": "ok", "figures": figs}
    fig = fig_gpu_confirm.draw(_summary(rehearsal), None)
    texts = [t.get_text() for ax in fig.axes[3:6] for t in ax.texts]
    assert texts == ["SmolLM2-135M + LoRA: carry checked; LoRA on a GPU"] * 3
    assert fig.axes[0].lines  # the from-scratch row is still drawn


def test_a_stage_not_run_says_so_in_its_row():
    summary = _summary(_stage("confirm_smollm2", "smollm2", 0.0))
    summary["stages"] = summary["stages"][:1]
    fig = fig_gpu_confirm.draw(summary, None)
    assert [t.get_text() for t in fig.axes[4].texts] == ["confirm_smollm2: not run"]
