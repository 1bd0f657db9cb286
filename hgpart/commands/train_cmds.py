"""``hgpart train``: train a placement file's partitioned model on K devices (TensorFlow imported only when run)."""

from __future__ import annotations

from pathlib import Path

import typer

from hgpart.commands import app
from hgpart.fileio import check_outputs
from hgpart.placement import STEPS_PER_CALL

__all__ = ["train"]


@app.command()
def train(
    placement: Path = typer.Option(..., "--placement", "-p", help="placement file (hgpart partition output)"),
    devices: str = typer.Option("logical", "--devices", help="logical | local | gpu | cluster:SPEC_FILE"),
    batch_size: int = typer.Option(0, "--batch-size", "-b", help="mini-batch size (0 = the placement's)"),
    steps: int = typer.Option(0, "--steps", help="training steps (0 = use --epochs)"),
    epochs: float = typer.Option(1.0, "--epochs", help="epochs over the dataset when --steps is 0"),
    mode: str = typer.Option("async", "--mode", help="async (threaded pipeline, bounded staleness) | sync (one update "
                             "per batch of --inflight micro-batches; BatchNorm uses per-micro-batch statistics, so "
                             "it equals single-device training only with --inflight 1)"),
    optimizer: str = typer.Option("adam", "--optimizer", help="adam | momentum"),
    lr: float = typer.Option(1e-3, "--lr", help="learning rate"),
    data: str = typer.Option("synthetic", "--data", "--dataset",
                             help="digits | synthetic | FILE.npz (arrays x, y) | FOLDER of class subfolders of images"),
    val_split: float = typer.Option(0.0, "--val-split", help="last fraction of the data kept for validation"),
    val_data: str | None = typer.Option(None, "--val-data", help="validation data (.npz or folder); overrides "
                                        "--val-split"),
    save: Path | None = typer.Option(None, "--save", help="save the trained model here (.keras, opens in plain "
                                     "Keras)"),
    inflight: int = typer.Option(0, "--inflight", help="async batches in flight / sync micro-batches (0: "
                                 "async one per pipeline stage, at most K + 1, when steps run as stages, K + 1 "
                                 "compiled, else K; sync K)"),
    pipeline: str = typer.Option("auto", "--pipeline", help="steps as: stages (one compiled function per "
                                 "pipeline stage, 1F1B; placements whose layers each sit on one part) | graph (one "
                                 "multi-device function per step) | compiled (--steps-per-call steps per compiled "
                                 "call, pipelined 1F1B inside it) | auto (stages where they apply and a step takes "
                                 ">= 0.25 s; a shorter step is timed every way and runs the fastest)"),
    steps_per_call: int = typer.Option(STEPS_PER_CALL, "--steps-per-call",
                                       help="training steps per call of the compiled pipeline"),
    trace: Path | None = typer.Option(None, "--trace", help="folder for Chrome/Perfetto traces (devices_trace.json: "
                                      "the ops of every device in one view, for a few extra steps)"),
    log: Path | None = typer.Option(None, "--log", help="per-step log file (.csv or .json)"),
    seed: int = typer.Option(0, "--seed", help="seed of the Keras initial weights and the data order"),
    init_weights: Path | None = typer.Option(None, "--init-weights", help="start from these weights (.keras or "
                                             ".weights.h5 of the placement's model) instead of the model's own"),
    checkpoint_dir: Path | None = typer.Option(None, "--checkpoint-dir", help="folder for partitioned checkpoints "
                                               "(the newest two kept; see docs/checkpoints.md)"),
    checkpoint_every: int = typer.Option(0, "--checkpoint-every", help="checkpoint every N steps (0 = at the end)"),
    resume: bool = typer.Option(False, "--resume", help="continue from the newest checkpoint in --checkpoint-dir, "
                                "under this placement (re-sharded if it differs)"),
) -> None:
    """Train a placement across devices: collocated gradients, async pipeline or sync micro-batches."""
    check_outputs(files={"--log": log, "--save": save},
                  folders={"--trace": trace, "--checkpoint-dir": checkpoint_dir})  # before any long work
    from rich.console import Console

    from hgpart.runtime.checkpoint import checkpoint_line
    from hgpart.runtime.train import train as run

    res = run(placement, devices=devices, batch_size=batch_size or None, steps=steps or None, epochs=epochs,
              mode=mode, optimizer=optimizer, lr=lr, data=data, val_split=val_split, val_data=val_data, save=save,
              inflight=inflight or None, trace=trace, log=log, seed=seed, progress=True,
              init_weights=init_weights, checkpoint_dir=checkpoint_dir, checkpoint_every=checkpoint_every,
              resume=resume, pipeline=pipeline, steps_per_call=steps_per_call)
    t = res.traffic
    con = Console()
    n, first, last = res.loss_ends()
    con.print(f"{res.steps} steps, {res.images} images in {res.seconds:.2f} s: [bold]{res.images_per_s:.1f} img/s[/]"
              f", loss {first:.4f} -> {last:.4f} (mean of the first / last {n} steps)")
    if res.pipeline:
        con.print(f"pipeline: {res.pipeline}")
    if res.validation is not None:
        con.print(f"validation after the last epoch: loss {res.validation[0]:.4f} accuracy {res.validation[1]:.4f}")
    c = t.check(res.predicted_fwd_bytes)
    con.print(f"bytes per step crossing devices: forward maps {c['forward']} (predicted {c['predicted_forward']:.0f}), "
              f"backward {c['backward']} (predicted {c['predicted_backward']:.0f} = Comm. Vol minus input nets "
              f"{t.input_nets}: no input gradient), model total {c['model']} vs predicted x2 {c['predicted_x2']:.0f}; "
              f"not modelled: loss gather {t.loss}, host feed {t.feed}")
    if log:
        con.print(f"log: {log}")
    if res.saved:
        con.print(f"saved: {res.saved} (keras.saving.load_model opens it)")
    if checkpoint_dir:
        con.print(checkpoint_line(checkpoint_dir))
    co = res.compute
    if co.get("fine_layers"):
        w = co["worst"]
        con.print(f"fine-grain compute: executed / assigned MACs {co['ratio']:.3f} over {co['fine_layers']} fine conv "
                  f"layers (per part " + ", ".join(f"{r:.2f}" for r in co["per_part"]) + f"; worst {w['layer']} on "
                  f"part {w['part']}: {w['ratio']:.2f})")
    if res.device_busy:
        con.print("device busy (traced steps, union of op intervals / wall time): "
                  + ", ".join(f"part {p} {100 * b:.1f}%" for p, b in enumerate(res.device_busy)))
    if trace:
        con.print(f"trace: {trace}/devices_trace.json (ops per device) and {trace}/pipeline_trace.json (batches per "
                  f"in-flight slot), Chrome/Perfetto format; raw TF profiler data under {trace}/tf_profile")
