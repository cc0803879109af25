"""The current sentence's trace as one file a notebook can open: every named tensor, with what it came from.

    import numpy as np
    trace = np.load("trace.npz")                    # no pickle needed: plain arrays and text
    trace["blocks.0.attn.pattern"].shape            # (1, 4, 10, 10)
    print(trace["_tokens"], trace["_about"])        # the tokens the model read; model, sentence, config (JSON)
"""
import io
import json

import numpy as np

from model.transformer import Trace


def trace_npz(trace: Trace, tokens: list[str], about: dict) -> bytes:
    """Every tensor of `trace` under its trace name, plus `_tokens` (what the model read) and `_about`
    (a JSON string: model, sentence, config), as one uncompressed .npz file."""
    arrays = {name: value.numpy() for name, value in trace.items()}
    arrays["_tokens"] = np.array(tokens, dtype=str)
    arrays["_about"] = np.array(json.dumps(about, ensure_ascii=False))
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def file_name(model: str, tokens: list[str]) -> str:
    """A readable file name: the model and the first words, letters and digits only."""
    words = "_".join("".join(c for c in t if c.isalnum()) for t in tokens[:4]).strip("_")
    stem = "".join(c if c.isalnum() else "_" for c in model)
    return f"trace_{stem}_{words or 'sentence'}"[:72] + ".npz"
