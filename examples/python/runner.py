"""The command line the Python examples share: a JSON config from examples/,
the model registered under `model`, trained with tessel.train on one process
or on every rank under mpirun (each rank holds only its shards).

    python3 examples/python/gpt.py [--mesh data=2,model=2] [--layout ...]
        [--steps N] [--out DIR] [--set key=value ...] [--sample N]
"""

import argparse
import json
import os

import tessel

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def main(model, config_file):
    p = argparse.ArgumentParser(description=f"train the Python model '{model}' with Tessel")
    p.add_argument("--config", default=os.path.join(EXAMPLES, config_file))
    p.add_argument("--mesh", default="")
    p.add_argument("--layout", default="")
    p.add_argument("--steps", type=int)
    p.add_argument("--out", help="run directory: metrics.jsonl and checkpoint/")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--sample", type=int, default=0, help="bytes to sample at the end (text)")
    args = p.parse_args()

    with open(args.config) as f:
        config = json.load(f)
    config["model"] = model
    config["mesh"], config["layout"] = args.mesh, args.layout
    if args.steps is not None:
        config["steps"] = args.steps
    for assignment in args.set:
        key, _, value = assignment.partition("=")
        try:
            config[key] = json.loads(value)
        except json.JSONDecodeError:
            config[key] = value

    def log(line):
        val = f"  val {line['val_loss']:.4f}" if "val_loss" in line else ""
        print(f"step {line['step'] + 1:5d}  loss {line['loss']:.4f}{val}", flush=True)

    trainer, lines = tessel.train(config, out=args.out, log=log)
    if trainer.is_root:
        shards = trainer.param_shapes()
        layout = f" ({trainer.layout})" if trainer.layout else ""
        print(f"{model} on mesh {trainer.mesh}{layout}: {trainer.parameter_count} "
              f"parameters; rank 0 holds wte as {shards.get('wte', shards[next(iter(shards))])}")
        print(f"final: train loss {lines[-1]['loss']:.4f}, val loss {lines[-1]['val_loss']:.4f} "
              f"(baseline {trainer.baseline_loss:.4f})")
        if args.out and args.sample > 0:
            text = tessel.TextModel(os.path.join(args.out, "checkpoint"))
            prompt = config.get("sample_prompt", "The ")
            print("sample:", prompt + text.sample(prompt, args.sample).decode("utf-8", "replace"))
