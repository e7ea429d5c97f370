"""Regenerate the shipped example dataset and tokenizer, deterministically and offline.

    python -m trainer.examples.make_examples

Writes `data/tiny.jsonl` (chat rows with instruction-like tasks) and `tokenizer/` (a byte-level
BPE trained in-process on that data, with a chat template). Nothing is downloaded. Re-running
produces byte-identical files, so the committed copies can be checked against this script.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
N_ROWS = 400
SEED = 1234
# Small on purpose: a 1k vocabulary keeps the tiny model's embedding ~64k parameters, and BPE
# over ~400 rows does not find more than ~1k useful merges anyway.
VOCAB_SIZE = 1024
SPECIAL_TOKENS = [
    "<|pad|>",
    "<|bos|>",
    "<|eos|>",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<|end|>",
]

# Prompt and answer are each closed by <|end|>; the assistant's <|end|> is inside its label span so
# the model learns to stop. `{% generation %}` marks assistant text for HF's assistant-mask API;
# our data code does not depend on it (it works from prefix renders, see trainer/data/batches.py).
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] == 'assistant' %}"
    "{{ '<|assistant|>' }}{% generation %}{{ message['content'] + '<|end|>' }}{% endgeneration %}"
    "{% else %}"
    "{{ '<|' + message['role'] + '|>' + message['content'] + '<|end|>' }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}"
)

_WORD_TEXT = (
    "apple river stone cloud green quick table window garden music paper light night market "
    "silver forest ocean bread candle winter summer yellow purple orange mountain valley bridge "
    "engine rocket planet garden letter number circle square simple happy little golden "
    "morning evening coffee pencil camera pocket ticket island castle dragon tiger rabbit "
    "turtle falcon violet copper marble velvet thunder breeze meadow harbor lantern mirror"
)
WORDS = _WORD_TEXT.split()
COUNTRIES = {
    "France": "Paris",
    "Japan": "Tokyo",
    "Italy": "Rome",
    "Spain": "Madrid",
    "Canada": "Ottawa",
    "Egypt": "Cairo",
    "Kenya": "Nairobi",
    "Peru": "Lima",
    "Norway": "Oslo",
    "Chile": "Santiago",
}


def _length(rng: random.Random) -> int:
    """Word counts skewed like instruction data: most short, a long tail (lognormal, 1..60)."""
    return max(1, min(60, int(rng.lognormvariate(1.8, 0.7))))


def _task(rng: random.Random) -> tuple[str, str]:
    kind = rng.randrange(6)
    words = [rng.choice(WORDS) for _ in range(_length(rng))]
    if kind == 0:
        return f"Reverse the order of these words: {' '.join(words)}", " ".join(reversed(words))
    if kind == 1:
        return f"Write these words in upper case: {' '.join(words)}", " ".join(words).upper()
    if kind == 2:
        a, b = rng.randrange(100), rng.randrange(100)
        return f"What is {a} plus {b}?", f"{a} plus {b} is {a + b}."
    if kind == 3:
        country = rng.choice(sorted(COUNTRIES))
        return (
            f"What is the capital of {country}?",
            f"The capital of {country} is {COUNTRIES[country]}.",
        )
    if kind == 4:
        return f"How many words are in: {' '.join(words)}", f"There are {len(words)} words."
    return f"Sort these words alphabetically: {' '.join(words)}", " ".join(sorted(words))


def make_rows(n_rows: int = N_ROWS, seed: int = SEED) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for _ in range(n_rows):
        prompt, answer = _task(rng)
        messages = [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}]
        if rng.random() < 0.2:
            messages.insert(0, {"role": "system", "content": "You answer briefly and exactly."})
        rows.append({"messages": messages})
    return rows


def write_dataset(rows: list[dict], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row, sort_keys=True) + "\n" for row in rows))


def train_tokenizer(rows: list[dict], out_dir: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    texts = [m["content"] for row in rows for m in row["messages"]]
    tokenizer.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<|bos|>",
        eos_token="<|eos|>",
        pad_token="<|pad|>",
        model_max_length=1024,
    )
    fast.chat_template = CHAT_TEMPLATE
    out_dir.mkdir(parents=True, exist_ok=True)
    # The template goes inside tokenizer_config.json (not chat_template.jinja) so that the
    # package data globs (json) ship it with the installed package.
    fast.save_pretrained(str(out_dir), save_jinja_files=False)


def main() -> None:
    rows = make_rows()
    write_dataset(rows, HERE / "data" / "tiny.jsonl")
    train_tokenizer(rows, HERE / "tokenizer")


if __name__ == "__main__":
    main()
