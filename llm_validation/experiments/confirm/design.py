"""The confirmation's design: the variants it compares and its scales (CPU, GPU).

Part of :mod:`llm_validation.experiments.confirm` (issue 39 split the module by concern).
"""

from __future__ import annotations

import dataclasses

from llm_validation.config import FinetuneConfig, ProxyConfig, SelectionConfig
from llm_validation.models.tiny import TinySize
from llm_validation.train.scratch import PretrainConfig


@dataclasses.dataclass(frozen=True)
class Variant:
    """One fine-tuning condition.

    Attributes:
        setting: training-set setting (``ft``, ``ft_up``, ``random``, ``easy``).
        features: clustering features (``trajectory`` or ``last``).
        k: proxy checkpoints used (5 ~ 1/3 epoch, 10 ~ 2/3, 15 ~ 1 epoch).
        proxy: ``small`` (the proxy model) or ``target`` (proxy = target, Fig. 4a).
        optimizer: ``adamw``, ``muon``, ``fsam``...
        needs: a module that must import for the variant to run (``None``: always).
        oracle_clean: an oracle beyond the paper: do not upsample the corrupted examples
            (whose answers are wrong, an irreducible loss) of the selected set.
        match_steps: another variant's key (``ft_up``): train on this variant's own data
            (``setting``) for exactly as many optimizer steps as that variant takes for the same
            seed (its selection, hence its upsampled size, is made from the same proxy run).
            ``ft_matched`` is FT with FT+UP's step count: "upsampling helps" apart from
            "training longer helps".
        late_oracle: upsample, instead of the hard cluster, as many examples as it holds
            taken in order of the proxy's learning time, latest first (issue 36: the paper's
            mechanism tested directly, whether or not the clustering picks late learners).
    """

    setting: str = "ft"
    features: str = "trajectory"
    k: int = 5
    proxy: str = "small"
    optimizer: str = "adamw"
    needs: str | None = None
    oracle_clean: bool = False
    match_steps: str | None = None
    late_oracle: bool = False


#: The conditions of the experiment (the paper's table/figure in the comment).
VARIANTS: dict[str, Variant] = {
    "ft": Variant("ft"),  # Table 2 FT
    "ft_matched": Variant("ft", match_steps="ft_up"),  # FT for FT+UP's steps (not in the paper)
    "ft_up": Variant("ft_up"),  # Table 2 FT+UP (trajectories, 5 checkpoints, small proxy)
    "random": Variant("random"),  # Table 4 Rand.
    "easy": Variant("easy"),  # Table 4 Easy
    "ft_up_last": Variant("ft_up", features="last"),  # Table 6 Ckpt.
    "ft_up_k10": Variant("ft_up", k=10),  # Fig. 4c
    "ft_up_k15": Variant("ft_up", k=15),  # Fig. 4c
    "ft_up_self": Variant("ft_up", proxy="target"),  # Fig. 4a (proxy = target)
    "ft_muon": Variant("ft", optimizer="muon", needs="sims.optim.factory"),  # Fig. 3 right
    "ft_up_muon": Variant("ft_up", optimizer="muon", needs="sims.optim.factory"),
    "ft_fsam": Variant("ft", optimizer="fsam", needs="sims.optim.hf"),  # SAM vs upsampling
    "ft_up_clean": Variant("ft_up", oracle_clean=True),  # beyond the paper: noise-free oracle
    "ft_up_late": Variant("ft_up", late_oracle=True),  # beyond: the latest learners (issue 36)
}


@dataclasses.dataclass(frozen=True)
class ConfirmConfig:
    """The confirmation experiment at one scale.

    Attributes:
        name: scale name (``cpu``, ``gpu``, or a test's).
        n_pretrain: pre-training problems (from-scratch targets only; disjoint from the rest).
        n_train: fine-tuning problems (95 % train / 5 % validation).
        n_test: problems per benchmark.
        n_heldout: clean held-out problems from the training distribution; their solution loss
            after fine-tuning is the low-variance companion of the accuracy (0: not measured).
        heldout_acc_per_source: the first this many held-out problems of each source are also
            answered (greedy generation) and scored: the per-source accuracy (0: not measured).
        corpus_seed: seed of the corpus.
        levels: difficulty levels of every split of the corpus (:func:`llm_validation.data.corpus.
            generate_corpus`; 1-4 = more digits, steps and larger coefficients).
        noise_rate: fraction of training examples with a wrong final answer (irreducible loss).
        target: ``scratch`` or a model spec (``gemma3-270m``).
        proxy: ``scratch`` (a smaller from-scratch model) or a model spec.
        target_pretrain: pre-training of a from-scratch target.
        proxy_pretrain: pre-training of a from-scratch proxy.
        proxy_train: proxy run (records 15 checkpoints over one epoch; 5/10/15 = first K).
        finetune: fine-tuning settings shared by every variant.
        selection: clustering settings (``features``/``n_checkpoints`` set per variant).
        variants: conditions to run (keys of :data:`VARIANTS`; the default is FT, FT with
            FT+UP's step count, FT+UP, random and easy, Table 2's and Table 4's columns;
            ``--variants all`` adds the last checkpoint, K=10/15, proxy = target, Muon, FSAM
            and the noise-free oracle).
        seeds: fine-tuning/proxy/selection seeds.
        max_new_tokens: evaluation generation budget.
        eval_batch_size: generation batch.
        probes_per_source: training examples per source whose loss is recorded during
            fine-tuning (learning times, eq. 11).
        n_records: loss records over each fine-tuning run (plus step 0), log-spaced
            (:func:`sims.selection.log_spaced_steps`).
        lt_records: recordings of every training example's loss during each proxy run,
            log-spaced from step 0 (issue 36): the learning times of the selection check
            (0: not recorded).
        execute_programs: run program-of-thought completions in the sandbox and score what
            they print (MAmmoTH; :mod:`llm_validation.execution`); ``False`` scores
            their text. Either way the report gives both accuracies of the programs.
        workers: parallel processes (default ``$SBT_WORKERS`` or all cores).
        threads: torch threads per process (``None``: cores / workers). One thread per worker
            is the fastest way to run many small models on a few (shared) cores.
    """

    name: str = "cpu"
    n_pretrain: int = 36_000
    n_train: int = 1100
    # issue 36: >= 300 items per format (150 in-distribution + 150 held-out templates), a
    # held-out split of 50 problems per source, every one answered (the per-source accuracy
    # of the late-learned sources on >= 50 items each)
    n_test: int = 300
    n_heldout: int = 650
    heldout_acc_per_source: int = 50
    corpus_seed: int = 0
    levels: tuple[int, ...] = (1, 2)
    noise_rate: float = 0.05
    target: str = "scratch"
    proxy: str = "scratch"
    # Small batches (many steps) matter more than width here: at batch 8 for 3 epochs a
    # 0.46M-parameter target learns to copy the question's numbers into its solution, which a
    # 0.9M one at batch 32 for 2 epochs (375 steps, same time) did not (session of 2026-11-23).
    # Issue 29: 6000 problems (1.35M tokens) leave it at 3-4 % average accuracy, unable to
    # add two 2-digit numbers, 12,000 (2.7M tokens) reach 8.6 %, 24,000 19.4 %; at ~0.5M the
    # compute-optimal token count is ~20x the parameters (~10M tokens), so the default
    # pre-trains on 36,000 problems x 4 epochs, 10.8M tokens (module docstring).
    target_pretrain: PretrainConfig = PretrainConfig(
        size=TinySize(hidden=96, layers=4, heads=4, kv_heads=2, intermediate=256),
        epochs=4.0,
        batch_size=8,
        lr=2e-3,
    )
    proxy_pretrain: PretrainConfig = PretrainConfig(
        size=TinySize(hidden=64, layers=2, heads=4, kv_heads=2, intermediate=192),
        epochs=3.0,
        batch_size=8,
        lr=2e-3,
    )
    proxy_train: ProxyConfig = ProxyConfig(
        model="",
        epoch_fraction=1.0,
        n_checkpoints=15,
        schedule_epochs=3.0,
        lr=1e-3,
        batch_size=32,
        per_device_batch_size=32,
        loss_batch_tokens=8192,
        dtype="float32",
        save_checkpoints=False,
    )
    finetune: FinetuneConfig = FinetuneConfig(
        model="",
        settings=("ft",),
        lora=False,
        epochs=3.0,
        lr=1e-3,
        batch_size=32,
        per_device_batch_size=32,
        weight_decay=0.0,
        dtype="float32",
        optimizer_kwargs={},
    )
    selection: SelectionConfig = SelectionConfig(small_sources="none", min_source_size=20)
    # issue 36: the paper's design: one pre-trained base; 10 fine-tuning seeds (data order,
    # proxy, clustering init) of FT, FT for FT+UP's steps and FT+UP. Random and easy are left
    # out of the default (they would take the run past 60 minutes on 2 cores; --variants adds
    # them): the page keeps the previous run's rows for them and says so.
    variants: tuple[str, ...] = ("ft", "ft_matched", "ft_up")
    seeds: tuple[int, ...] = tuple(range(10))
    max_length: int = 192
    max_new_tokens: int = 144
    eval_batch_size: int = 64
    probes_per_source: int = 16
    n_records: int = 8
    lt_records: int = 12
    execute_programs: bool = True
    workers: int | None = None
    threads: int | None = 1

    def __post_init__(self):
        unknown = [v for v in self.variants if v not in VARIANTS]
        if unknown:
            raise ValueError(f"unknown variant(s) {unknown}; choose from {', '.join(VARIANTS)}.")
        if "ft" not in self.variants:
            raise ValueError("`variants` must include 'ft' (every comparison is paired with it).")
        if len(self.seeds) < 1:
            raise ValueError("`seeds` must name at least one seed.")


_CPU = ConfirmConfig()

#: Pre-training problems of the ``gpu-scratch`` scale. Its time, estimated from FLOP counts
#: (6 N T for training, N parameters, T tokens; not measured): target N = 25.4M (8 layers of
#: 3.15M + 0.26M embedding), pre-training 60,000 x 2 epochs x 97 tokens = 11.6M tokens, 1.8e15
#: FLOPs (the 0.85M proxy: 6e13); 15 fine-tuning runs of 179 steps (FT; ~230 for the upsampled
#: variants) x 32 x 175 tokens, 2.7e15; generation ~1e13 per run. 4.6e15 FLOPs in all, ~230 s
#: at an assumed 20 TFLOP/s achieved (fp32 pre-training, bf16 fine-tuning; the CPU target runs
#: at 16 GFLOP/s per core, measured), plus ~60 s of per-step latency in pre-training, ~45 s of
#: generation latency (16 runs of ~6 batches x 144 steps over 4 workers) and ~30 s of start-up:
#: about 6 minutes, inside the 450-s budget with a quarter to spare. An estimate, not a timing.
GPU_SCRATCH_PRETRAIN = 60_000

#: The documented scales (module docstring): ``cpu`` (estimated 40-53 minutes on 2 idle cores),
#: ``gpu`` and ``gpu-scratch`` (one H100; estimates, not run in the session that wrote them)
#: and ``quick`` (a smoke run of every stage on minute models, for tests and ``--quick``
#: figures; its numbers mean nothing).
SCALES: dict[str, ConfirmConfig] = {
    "cpu": _CPU,
    "quick": dataclasses.replace(
        _CPU,
        name="quick",
        n_pretrain=200,
        levels=(1, 2, 3, 4),
        n_train=160,
        n_test=4,
        n_heldout=40,
        noise_rate=0.1,
        target_pretrain=PretrainConfig(
            size=TinySize(hidden=32, layers=1, heads=4, kv_heads=2),
            epochs=1,
            vocab_size=300,
            batch_size=16,
        ),
        proxy_pretrain=PretrainConfig(
            size=TinySize(hidden=16, layers=1, heads=2, kv_heads=1),
            epochs=1,
            vocab_size=300,
            batch_size=16,
        ),
        proxy_train=dataclasses.replace(_CPU.proxy_train, batch_size=8, per_device_batch_size=8),
        finetune=dataclasses.replace(
            _CPU.finetune, epochs=1, batch_size=16, per_device_batch_size=16
        ),
        selection=dataclasses.replace(_CPU.selection, min_source_size=4),
        variants=("ft", "ft_up", "random", "easy", "ft_up_last"),
        seeds=(0, 1),
        workers=1,
        heldout_acc_per_source=2,
        max_new_tokens=4,
        probes_per_source=3,
        n_records=3,
    ),
    # GPU: 3000 problems, 3 epochs at effective batch 32 (~270 steps; the paper's 2e-5 over
    # ~6000 steps becomes 1e-4 over ~270), LoRA r=128/alpha=512 as in Section 6, 4 processes
    # sharing the H100 (small models leave it idle otherwise). Issue 29: the cpu scale's
    # design (five seeds; ft, ft_matched, ft_up, random, easy; per-source held-out accuracy).
    # Estimate (the issue-14 one rescaled, not run): 5 proxy runs of ~1.5 min and 26
    # fine-tune+eval runs of ~1.3 min (the upsampled ones ~25 % longer), over 4 workers:
    # ~12-15 minutes.
    "gpu": ConfirmConfig(
        name="gpu",
        n_pretrain=0,
        levels=(1, 2, 3, 4),  # pretrained models: the full difficulty range
        n_train=3000,
        n_test=300,
        n_heldout=650,
        noise_rate=0.05,
        target="gemma3-270m",
        proxy="smollm2-135m-instruct",
        proxy_train=ProxyConfig(
            model="",
            epoch_fraction=1.0,
            n_checkpoints=15,
            schedule_epochs=3.0,
            lr=1e-4,
            batch_size=32,
            per_device_batch_size=32,
            loss_batch_tokens=32768,
            save_checkpoints=False,
        ),
        finetune=FinetuneConfig(
            model="",
            settings=("ft",),
            lora=True,
            epochs=3.0,
            lr=1e-4,
            batch_size=32,
            per_device_batch_size=32,
        ),
        selection=SelectionConfig(small_sources="none", min_source_size=20),
        max_length=256,
        max_new_tokens=128,
        eval_batch_size=150,
        probes_per_source=32,
        n_records=10,
        heldout_acc_per_source=50,
        workers=4,
    ),
    "gpu-scratch": dataclasses.replace(
        _CPU,
        name="gpu-scratch",
        n_pretrain=GPU_SCRATCH_PRETRAIN,
        levels=(1, 2, 3, 4),  # 60,000 problems exhaust levels 1-2's GSM number space
        n_train=2000,
        n_test=300,
        n_heldout=1040,
        target_pretrain=PretrainConfig(
            size=TinySize(hidden=512, layers=8, heads=8, kv_heads=4, intermediate=1536),
            epochs=2.0,
            batch_size=64,
            lr=1e-3,
        ),
        proxy_pretrain=PretrainConfig(
            size=TinySize(hidden=128, layers=4, heads=4, kv_heads=2, intermediate=384),
            epochs=2.0,
            batch_size=64,
            lr=2e-3,
        ),
        finetune=dataclasses.replace(_CPU.finetune, lr=3e-4, dtype="auto"),
        eval_batch_size=256,
        probes_per_source=32,
        heldout_acc_per_source=80,
        workers=4,
        threads=4,
    ),
}


# ----------------------------------------------------------------------------- cost model

#: CPU seconds (one thread) of what issue 36's design adds to a measured run
#: (:func:`llm_validation.experiments.confirm.estimate.design_extras`), both measured in issue
#: 36's pilot (3,000 pre-training problems x 2 epochs, 2 seeds, on 2 cores at load 4-11): a
#: fine-tuning + evaluation run cost 145-149 CPU-s at 99 steps against the committed run's ~85
#: s with 1882 fewer generated answers (0.033 s per answer), and a proxy run 82-84 CPU-s with
#: 12 log-spaced recordings of 1045 examples against 29 s without (0.0043 s per example and
#: recording). Loaded-machine costs: the estimate errs long on idle cores.
COSTS = {"gen_item": 0.033, "lt_record": 0.0043}
