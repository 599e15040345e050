"""End-to-end confirmation of the paper's data-centric claims on a self-contained corpus (issue 14).

The paper's Table 2 cannot be rerun offline (no MathInstruct, benchmarks or its models). This
experiment tests its central prediction on the generated MathInstruct-like corpus of
:mod:`llm_validation.data.corpus`: upsampling the examples a small proxy learns late improves the
held-out accuracy of a larger model (Table 2), random upsampling does about nothing and easy
upsampling hurts (Fig. 4d, Table 4), trajectories beat the last checkpoint for clustering
(Fig. 4b, Table 6), 5/10/15 checkpoints (Fig. 4c), proxy = target (Fig. 4a), AdamW and Muon
(Fig. 3), and FSAM when ``sims.optim`` provides it (is upsampling a cheap substitute for SAM?).

Scales (:data:`SCALES`):

* ``cpu``: from-scratch Llama decoders (target 0.46M parameters, proxy 0.13M) pre-trained once
  on a disjoint split of the corpus (plain text, :mod:`llm_validation.train.scratch`) with a
  locally trained tokenizer that splits every number into single digits, then fully fine-tuned
  with the same pipeline. Default (issue 36): one pre-trained base, 10 fine-tuning seeds (data
  order, proxy, clustering init) of ``ft``, ``ft_matched`` (FT for exactly FT+UP's optimizer
  steps) and ``ft_up``; 300 items per benchmark format (150 on training templates, 150 on
  held-out templates), 50 answered held-out problems per source, levels 1-2, 36,000
  pre-training problems x 4 epochs. ``confirm`` prints its estimate before any work
  (:func:`~llm_validation.experiments.confirm.estimate.estimate_line`: the committed run's CPU
  seconds plus :func:`~llm_validation.experiments.confirm.estimate.design_extras` for this
  design's items and recordings); ``benchmarks/bench_confirm.py`` checks an estimate against a
  run's measured CPU and wall time.
  Random and easy (``--variants``) are left out of the default to stay within 60 minutes.

  **Issue 36's checks** (in ``report.md`` and the summary): accuracy per format on the
  in-distribution and the held-out-template half; multiple choice scored by its letter and
  with a stated value mapped to its option, against the key's best constant-letter baseline;
  per-item verdicts (``item_correct``, int8 per variant, seed and item) and the paired
  bootstrap over seeds and items beside the t-interval over seeds (the bootstrap decides: the
  item sample is most of the noise); the selection check (learning times, eq. 11, of every
  training example from the proxy's losses on a log-spaced schedule from step 0; the
  upsampled examples against the rest: medians, AUC, per-source Spearman). The table below is
  issue 29's measurement (the committed run), before this design.
* ``gpu``: proxy SmolLM2-135M-Instruct, target Gemma-3-270M (both from the GGUF packages), LoRA
  as in Section 6, issue 36's design (10 seeds of the three default variants, 300 items per
  format; levels 1-4); not run in the session that wrote it.
* ``gpu-scratch``: the ``cpu`` design scaled up for one H100: a 25M-parameter target (0.85M
  proxy) pre-trained within the run on 60,000 generated problems (levels 1-4), issue 36's
  design (10 seeds of the three default variants); issue 29's estimate for 3 seeds of five
  variants was about 6 minutes (the comment at its entry); 30 runs with 6x the items take
  longer (not run, not timed).
* ``quick``: a smoke run of every stage on minute models (tests; its numbers mean nothing).

**Accuracy vs compute (issue 29, measured).** One seed, FT only, on this project's 2 shared
cores (CPU seconds of one thread, ``time.process_time``, on a loaded machine: about 1.3-1.7x
the idle cost); average accuracy over the six benchmark formats (60 problems each; chance 0 for
the five numeric formats, 25 % for MMLU-Math's 4 choices, 4.2 % on average) and held-out
accuracy (greedy answers to the first 8 held-out problems of each of the 13 sources):

======================== ====== ========= ============= ======= =========== =========
point                    levels tokens    pre-train CPU FT avg  held-out    held-out
                                (pre-tr.) s (target)    acc. %  acc. %      loss
======================== ====== ========= ============= ======= =========== =========
6000 x 3 ep., step 1600  1-4    1.24M     ~215 (part)   1.4     8.7         0.351
6000 x 3 ep. (old cpu)   1-4    1.74M     303           3.1     8.7         0.309
6000 x 3 ep., step 1800  1-2    1.08M     ~180 (part)   4.2     15.7        0.237
6000 x 3 ep.             1-2    1.35M     226           4.4     14.6        0.235
same, FT 6 epochs        1-2    1.35M     226           6.1     20.2        0.208
12000 x 3 ep.            1-2    2.7M      333 (less     8.6     11.7        0.226
                                          loaded)
24000 x 3 ep.            1-2    5.4M      631 (less     19.4    14.5        0.196
                                          loaded)
36000 x 4 ep. (cpu, 5    1-2    10.8M     1430          21.4    21.0        0.154
seeds: mean)
======================== ====== ========= ============= ======= =========== =========

(The "step" rows are intermediate checkpoints of the same pre-training, not annealed.) At
levels 1-2 and 1.35M tokens, per benchmark: GSM8K 0.0, MATH 1.7, NumGLUE 5.0, SVAMP 0.0,
DeepMind 1.7, MMLU-Math 18.3 %; at 2.7M tokens 15.0, 5.0, 0.0, 1.7, 1.7, 28.3 %; at 5.4M
71.7, 8.3, 1.7, 1.7, 0.0, 33.3 % (GSM8K learned; held-out GSM templates and programs 62 %,
arithmetic, fractions, modular, ... 0 %); per source the held-out accuracy runs from 0 (arithmetic,
GSM templates, fractions, percentages, ...) to 75 % (program-of-thought, whose programs only
copy numbers), so the sources still differ in when they are learned. The models copy the
template and most numbers but cannot add two 2-digit numbers ("94 - 18 = 10"): arithmetic,
not format, is the floor. Levels 1-2 gain ~1 point (not significant at 360 problems), the
last quarter of pre-training ~2 points, 6 instead of 3 fine-tuning epochs 1.7 points (its run
costs 130 instead of 71 CPU-s; the default keeps the paper's 3), doubling the pre-training
tokens 4.2 points and doubling it again 10.8 points (19.4 % at 5.4M tokens, just under the
20 % the issue asks for). The default spends the rest of the 60-minute budget on
pre-training: 36,000 problems x 4 epochs, 10.8M tokens (2x the 5.4M point, near the
compute-optimal ~20 tokens per parameter of a 0.5M model). **Measured** (the last row; the
run committed in ``figures/summaries``): FT 21.4 ± 1.8 % over 5 seeds (GSM8K 91.3, MATH 8.0,
NumGLUE 10.0, SVAMP 2.7, DeepMind 1.7, MMLU-Math 14.7 %, below its 25 % chance: the models
rarely answer with a choice letter), PT 0.8 %; 3846 CPU-s in all (pre-training 1917, proxies
145, fine-tuning 1784): 54 min of wall time on 2 cores shared with other work during the
pre-training, 41 min estimated on 2 idle cores by ``benchmarks/bench_confirm.py`` from the
run's own CPU seconds (``--variants all``: 69 min). From the 5.4M-token point (19.4 %, one
seed) doubling the tokens gained 2 points (21.4 %, 5-seed mean; the seeds' sd is 1.8): the
curve flattens, far from the doublings' +4 and +11 below. Per-job costs measured on the loaded
machine: target pre-training 226 CPU-s per 1.35M tokens (333 per 2.7M, 631 per 5.4M when
less loaded), a fine-tuning +
evaluation run 71-81 CPU-s (99 steps; 53 when less loaded), a proxy run ~40 CPU-s. With the
loaded costs: 1808 s of pre-training (the proxy's ~470 s beside it), 5 proxy runs (120 s on
2 cores), 26 fine-tuning runs (~85 s for FT, ~98 s for the ~25 % longer upsampled ones and
``ft_matched``, ~90 s for the pretrained model's evaluation) scheduled on 2 cores, 1240 s:
53 minutes; with the less-loaded costs about 40.

Everything is resumable (finished runs are kept in a :class:`sims.runtime.parallel.JobStore`,
and each fine-tuning resumes from its last epoch checkpoint). The aggregate is an ``xarray.Dataset``
(``results.nc``) with the accuracy of every (variant, seed, benchmark), the solution loss of
clean held-out problems of the training distribution (a continuous, low-variance companion of
the accuracy, which tiny models leave near the floor), the fine-tuning loss
trajectories of per-source probe sets, the learning-time entropies (main paper eq. 11) and the
hard cluster's composition; :func:`report` prints the tables in the layout of the paper's
Tables 2, 4 and 6 (mean ± std over seeds, paired differences with 95 % confidence intervals).
"""

# The package's parts, by concern (issue 39): design (variants, scales), jobs (what a worker
# runs), run (the driver and --reuse), analysis (statistics, aggregation), report (the tables),
# estimate (the announced wall time).
# The names below are the package's API; the underscored ones are read by the findings page.
from llm_validation.experiments.confirm.analysis import (
    heldout_subset,
    learning_times,
    matched_epochs,
    paired_ci,
    score_heldout,
)
from llm_validation.experiments.confirm.design import (
    GPU_SCRATCH_PRETRAIN,
    SCALES,
    VARIANTS,
    ConfirmConfig,
    Variant,
)
from llm_validation.experiments.confirm.estimate import (
    committed_costs,
    design_extras,
    estimate_line,
    estimate_run,
    lpt_makespan,
)
from llm_validation.experiments.confirm.report import (
    _PAIRS as _PAIRS,
)
from llm_validation.experiments.confirm.report import (
    ACCURACY_MARGIN,
    CHANCE,
    report,
)
from llm_validation.experiments.confirm.report import (
    _avg_accuracy as _avg_accuracy,
)
from llm_validation.experiments.confirm.report import (
    _mean_heldout_loss as _mean_heldout_loss,
)
from llm_validation.experiments.confirm.report import (
    _source_losses as _source_losses,
)
from llm_validation.experiments.confirm.report import (
    _worst_source_accuracy as _worst_source_accuracy,
)
from llm_validation.experiments.confirm.report import (
    _worst_source_loss as _worst_source_loss,
)
from llm_validation.experiments.confirm.run import (
    _in_reused_run as _in_reused_run,
)
from llm_validation.experiments.confirm.run import (
    check_reuse_folder,
    run_confirmation,
)

__all__ = [
    "Variant",
    "VARIANTS",
    "ConfirmConfig",
    "SCALES",
    "run_confirmation",
    "report",
    "learning_times",
    "paired_ci",
    "matched_epochs",
    "heldout_subset",
    "score_heldout",
    "check_reuse_folder",
    "ACCURACY_MARGIN",
    "CHANCE",
    "GPU_SCRATCH_PRETRAIN",
    "estimate_run",
    "estimate_line",
    "committed_costs",
    "design_extras",
    "lpt_makespan",
]
