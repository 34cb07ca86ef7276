"""Tessel from Python: models with named dims, trained on any mesh.

The C++ core is the extension ``tessel._tessel``; this package re-exports it
and adds :func:`train`, the CLI's step loop (metrics.jsonl, evaluation,
final checkpoint) over :class:`Trainer`. See docs/python.md.
"""

import ctypes
import ctypes.util
import json
import math
import os
import sys
import time

# Open MPI loads its components as plugins that resolve symbols of libmpi;
# a Python extension is loaded RTLD_LOCAL, so make libmpi global first (as
# mpi4py does). Harmless without mpirun.
_libmpi = ctypes.util.find_library("mpi")
if _libmpi:
    try:
        ctypes.CDLL(_libmpi, mode=ctypes.RTLD_GLOBAL)
    except OSError:
        pass

from ._tessel import (  # noqa: E402
    Builder,
    Error,
    Program,
    Scope,
    TextModel,
    Trainer,
    build_model,
    config_keys,
    read_checkpoint_info,
    read_safetensors,
    register_model,
    registered_models,
    resolve_config,
)

from ._tessel import _report_fatal_error  # noqa: E402


def _end_job_on_uncaught(kind, value, tb, _previous=sys.excepthook):
    """An uncaught exception on one rank ends every rank (as the CLI does):
    otherwise this rank would enter MPI_Finalize at exit while its peers wait
    in their next collective until the comm watchdog fires. Without MPI it
    only prints the traceback."""
    _previous(kind, value, tb)
    if int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1")) > 1:
        _report_fatal_error(f"{kind.__name__}: {value}", 1)


sys.excepthook = _end_job_on_uncaught

__all__ = [
    "Builder", "Error", "Program", "Scope", "TextModel", "Trainer", "build_model",
    "config_keys", "read_checkpoint_info", "read_safetensors", "register_model",
    "registered_models", "resolve_config", "train", "read_metrics",
]


def train(config, out=None, log=None):
    """Trains `config` (a dict of the JSON configs' keys) for config["steps"].

    Evaluates every ``eval_every`` steps and at the last, as ``tessel train``
    does. With `out`, the root rank writes ``out/metrics.jsonl`` (the CLI's
    keys: step, loss, lr, grad_norm, step_ms, tokens_per_s, gflops,
    val_loss), every rank joins the save of ``out/checkpoint``, and the
    root writes ``out/summary.json`` once training ends (what `tessel report`
    reads: final losses, baseline, model, mesh, layout, precision; no
    memory figures, which only the CLI measures).
    `log(line)` is called on the root with each step's metrics. Returns the
    Trainer and the list of metrics dicts (on every rank).
    """
    trainer = Trainer(config)
    cfg = trainer.config
    steps, eval_every = cfg["steps"], cfg["eval_every"]
    metrics_file = None
    if out is not None and trainer.is_root:
        os.makedirs(out, exist_ok=True)
        metrics_file = open(os.path.join(out, "metrics.jsonl"), "w")
    lines = []
    try:
        for s in range(trainer.steps_done, steps):
            t0 = time.perf_counter()
            line = trainer.step()
            seconds = time.perf_counter() - t0
            if not math.isfinite(line["loss"]):
                raise Error(f"step {s}: loss is {line['loss']} (diverged)")
            line["step_ms"] = seconds * 1e3
            line["tokens_per_s"] = trainer.items_per_step / seconds
            line["gflops"] = trainer.flops_per_step / seconds / 1e9
            if (eval_every > 0 and (s + 1) % eval_every == 0) or s + 1 == steps:
                line.update(trainer.evaluate())
            lines.append(line)
            if metrics_file:
                metrics_file.write(json.dumps(line) + "\n")
                metrics_file.flush()
            if log and trainer.is_root:
                log(line)
        if out is not None:
            trainer.save_checkpoint(os.path.join(out, "checkpoint"))
            if trainer.is_root:
                _write_summary(out, trainer, lines)
    finally:
        if metrics_file:
            metrics_file.close()
    return trainer, lines


def _write_summary(out, trainer, lines):
    """out/summary.json for a finished Python run, written whole, then renamed."""
    cfg = trainer.config
    val = [m["val_loss"] for m in lines if "val_loss" in m]
    summary = {
        "written_by": "python",
        "model": cfg["model"] if isinstance(cfg["model"], str) else str(cfg["model"]),
        "mesh": trainer.mesh,
        "layout": trainer.layout,
        "precision": cfg["precision"],
        "steps": len(lines),
        "final_loss": lines[-1]["loss"] if lines else None,
        "final_val_loss": val[-1] if val else None,
        "baseline_loss": trainer.baseline_loss,
    }
    path = os.path.join(out, "summary.json")
    with open(path + ".tmp", "w") as f:
        json.dump(summary, f, indent=2)
    os.replace(path + ".tmp", path)


def read_metrics(path):
    """The lines of a metrics.jsonl (a run directory or the file) as dicts."""
    if os.path.isdir(path):
        path = os.path.join(path, "metrics.jsonl")
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]
