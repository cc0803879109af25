"""The training lab's setup in a link: its preset, and every knob changed from that preset.

A link names the preset (`preset=tales`) and only the knobs that differ from it (`n-layers=3&lr=0.001`): a knob
left at its preset's value is not written, so a preset's link is its name alone and a teacher's link stays short.
Opening a link applies the preset, then each knob over it. A knob's value must be one its widget on the lab page
offers (one of its choices, a whole number or a finite number within its range, 1 or 0 for a switch); anything
else falls back to the preset's value. A link never starts training, and it never carries the text a student
pastes or uploads to train on (long, and theirs): a link to "Your own text" opens that task with an empty box.

Fields are named as explorer/registry.py names them (`n-layers`); each is a setup key with "-" for "_".
"""
import math
from dataclasses import asdict

from explorer.lab.training import CHOICES, PRESETS, RANGES, TASKS, LabSetup
from explorer.registry import FIELD_CHARS, LAB, LAB_KNOBS

MODEL_KEYS = ("d_model", "n_heads", "n_layers", "d_ff", "max_len", "pos", "norm", "norm_position", "activation",
              "embed_scale")
TRAIN_KEYS = ("optimizer", "lr", "batch_size", "warmup", "schedule", "steps", "grad_clip", "label_smoothing",
              "weight_decay")
PROBE_CHARS = FIELD_CHARS        # the probe box's length: the longest field a link carries

CHOOSE = {"task": tuple(TASKS), **{key: tuple(CHOICES[key]) for key in
                                   ("tokenizer", "pos", "norm", "norm_position", "activation", "optimizer", "schedule")}}
WHOLE = {key: bounds for key, bounds in RANGES.items() if isinstance(bounds[0], int)}
REAL = {key: bounds for key, bounds in RANGES.items() if isinstance(bounds[0], float)}
SWITCHES = ("embed_scale",)
TEXT = ("probe",)


def field_name(key: str) -> str:
    """A setup key's field name in a link: n_layers -> n-layers."""
    return key.replace("_", "-")


KNOBS = tuple(field_name(key) for key in LAB_KNOBS)
assert set(LAB_KNOBS) == {"task", "tokenizer", *TEXT, *MODEL_KEYS, *TRAIN_KEYS}, "registry.LAB_KNOBS is every knob"
assert set(LAB_KNOBS) == {*CHOOSE, *WHOLE, *REAL, *SWITCHES, *TEXT}, "every knob has a check"
assert dict(LAB.fields)["preset"] == "lab_preset"


def preset_fields(preset: str) -> dict[str, object]:
    """Every knob's value in preset `preset`, by field name."""
    setup: LabSetup = PRESETS[preset][1]
    train = asdict(setup.train)
    values = {"task": setup.task, "tokenizer": setup.tokenizer, "probe": setup.probe,
              **{key: setup.model[key] for key in MODEL_KEYS}, **{key: train[key] for key in TRAIN_KEYS}}
    return {field_name(key): values[key] for key in LAB_KNOBS}


def in_link(fields: dict[str, object]) -> dict[str, object]:
    """What a link carries of the lab's fields (by name): the preset (the first before the lab has opened), and each
    knob that differs from it."""
    preset = fields.get("preset") or next(iter(PRESETS))
    if preset not in PRESETS:
        return {}
    base = preset_fields(preset)
    return {"preset": preset, **{name: value for name, value in fields.items()
                                 if name in base and value is not None and _differs(value, base[name])}}


def _differs(value, base) -> bool:
    if isinstance(base, bool):
        return not isinstance(value, bool) or value != base
    if isinstance(base, (int, float)):
        return not isinstance(value, (int, float)) or not math.isclose(value, base, rel_tol=1e-9, abs_tol=0.0)
    return value != base


def check(name: str, raw) -> object | None:
    """A link's (or a lesson's) value for knob `name` as its widget holds it, or None when the widget does not offer
    it. `raw` is the link's text, or a value read from a lesson's JSON."""
    key = name.replace("-", "_")
    if isinstance(raw, float) and not math.isfinite(raw):
        return None
    if key in TEXT:
        return raw[:PROBE_CHARS] if isinstance(raw, str) else None
    text = str(raw).strip() if not isinstance(raw, bool) else ("1" if raw else "0")
    if key in CHOOSE:
        return text if text in CHOOSE[key] else None
    if key in SWITCHES:
        return {"1": True, "true": True, "0": False, "false": False}.get(text.lower())
    if len(text) > 40:                                     # no number a knob offers is that long
        return None
    try:
        number = float(text)
    except ValueError:
        return None
    if not math.isfinite(number):
        return None
    if key in WHOLE:
        low, high = WHOLE[key]
        return int(number) if number.is_integer() and low <= number <= high else None
    if key in REAL:
        low, high = REAL[key]
        return number if low <= number <= high else None
    return None


def opened(linked: dict[str, object], current: str | None = None) -> tuple[dict[str, object], list[str]]:
    """Every lab field's value for a link's lab fields (by name): its preset (else `current`, else the first), then
    each knob the link sets over it; and the names of the fields whose value the lab does not offer."""
    refused = []
    preset = linked.get("preset")
    if preset is not None and preset not in PRESETS:
        refused.append("preset")
        preset = None
    preset = preset or (current if current in PRESETS else next(iter(PRESETS)))
    fields = {"preset": preset, **preset_fields(preset)}
    for name in KNOBS:
        if name in linked:
            value = check(name, linked[name])
            if value is None:
                refused.append(name)
            else:
                fields[name] = value
    return fields, refused


def as_text(value) -> str:
    """A field's value as a link writes it: 1 or 0 for a switch, at most 10 significant digits for a number."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return f"{value:.10g}"
    return str(value)
