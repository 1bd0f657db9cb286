"""The progress bar of a training run: epoch, steps done, last loss and accuracy, images/s, validation.

Usage::

    bar = FitProgress(total_steps=120, epochs=3)
    bar.step(loss=0.52, accuracy=0.81, images_per_s=410.0)     # after every finished step
    bar.epoch_end(EpochMetrics(epoch=0, loss=0.6, accuracy=0.8, val_loss=0.4, val_accuracy=0.9))
    bar.stop()

After every epoch one line is printed above the bar with the epoch's training loss and accuracy (means over its
steps) and, with validation data, its validation loss and accuracy; the bar keeps the latest validation figures.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["EpochMetrics", "FitProgress"]


@dataclass(frozen=True)
class EpochMetrics:
    """What one epoch measured (validation figures are None without validation data)."""

    epoch: int
    loss: float
    accuracy: float
    val_loss: float | None = None
    val_accuracy: float | None = None

    def line(self, epochs: int) -> str:
        """``epoch 2/3: loss 0.4120 accuracy 0.8811 val_loss 0.3301 val_accuracy 0.9112``."""
        text = f"epoch {self.epoch + 1}/{epochs}: loss {self.loss:.4f} accuracy {self.accuracy:.4f}"
        if self.val_loss is not None and self.val_accuracy is not None:
            text += f" val_loss {self.val_loss:.4f} val_accuracy {self.val_accuracy:.4f}"
        return text


class FitProgress:
    """A rich progress bar over all steps of a run (see the module docstring)."""

    def __init__(self, total_steps: int, epochs: int, *, done: int = 0, epoch: int = 0) -> None:
        """A bar over ``total_steps`` with ``done`` of them already made (a resumed run), in epoch ``epoch``."""
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.epochs = epochs
        self.progress = Progress(TextColumn("[bold]train[/] epoch {task.fields[epoch]}"), BarColumn(),
                                 MofNCompleteColumn(),
                                 TextColumn("loss {task.fields[loss]:.4f} acc {task.fields[acc]:.3f}  "
                                            "{task.fields[ips]:.1f} img/s{task.fields[val]}"),
                                 TimeRemainingColumn())
        self.task = self.progress.add_task("train", total=total_steps, completed=done,
                                           epoch=f"{epoch + 1}/{epochs}", loss=float("nan"),
                                           acc=float("nan"), ips=0.0, val="")
        self.progress.start()

    def step(self, *, loss: float, accuracy: float, images_per_s: float) -> None:
        self.progress.update(self.task, advance=1, loss=loss, acc=accuracy, ips=images_per_s)

    def epoch_end(self, m: EpochMetrics) -> None:
        self.progress.console.print(m.line(self.epochs))
        val = "" if m.val_loss is None else f"  val_loss {m.val_loss:.4f} val_acc {m.val_accuracy:.3f}"
        self.progress.update(self.task, epoch=f"{min(m.epoch + 2, self.epochs)}/{self.epochs}", val=val)

    def stop(self) -> None:
        self.progress.stop()
