"""Mutations of valid hgpart inputs for the CLI fuzzer (``tests/test_fuzz_cli.py``).

Usage::

    rng = random.Random(7)
    text = mutate_json(rng, valid_placement_dict, donors=[other_model_placement_dict])
    argv = mutate_argv(rng, ["partition", "--model", "lenet5", "--k", "2"])

Every mutator is a plain function of a seeded ``random.Random``, so one seed
gives one sequence of cases. The mutations are the ones a hostile or careless
user produces: truncation, type changes, wrong lengths, huge or negative
numbers, unicode, missing keys, parts of another model's file.
"""

from __future__ import annotations

import copy
import json
import random
import re
from collections.abc import Callable
from typing import Any

__all__ = ["mutate_json", "mutate_text", "mutate_argv", "ODD_VALUES", "ODD_TOKENS"]

#: JSON values of every type, including the ones that break naive readers
ODD_VALUES: list[Any] = [
    None, True, False, 0, -1, 1, 2, -(10**9), 10**30, 2**63, 1e308, -1e-308, float("nan"), float("inf"),
    0.5, "", "0", "-3", "abc", "ü∂ƒ", "名前", "\u202e\u200b", "\x00", "1e400", [], [1, 2], {}, {"a": 1},
    ["x"] * 5, " " * 3, "a" * 300,
]

#: command-line tokens: numbers out of range, non-numbers, unicode, option-looking strings
ODD_TOKENS: list[str] = [
    "0", "-1", "-5", "1", "2", "3", "65537", "99999999999999999999", "1e400", "nan", "inf", "-inf", "-0", "0.0",
    "", " ", "abc", "ü", "名前", "x" * 300, "0x10", "1,2,,", ",", "--", "-", "--k", "2,4", "1.5", "/proc/x.json",
    "/dev/null/x", "1e-9",
]


# ------------------------------------------------------------------------------------------------- JSON documents
def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside ``obj`` (dict keys and list indices), the root excluded."""
    out: list[tuple[Any, ...]] = []
    items: list[tuple[Any, Any]] = list(obj.items()) if isinstance(obj, dict) else \
        list(enumerate(obj)) if isinstance(obj, list) else []
    for key, value in items:
        out.append(prefix + (key,))
        if len(out) < 4000:
            out.extend(_paths(value, prefix + (key,)))
    return out


def _get(obj: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        obj = obj[key]
    return obj


def _delete(rng: random.Random, doc: Any, path: tuple[Any, ...]) -> None:
    parent = _get(doc, path[:-1])
    del parent[path[-1]]


def _retype(rng: random.Random, doc: Any, path: tuple[Any, ...]) -> None:
    _get(doc, path[:-1])[path[-1]] = copy.deepcopy(rng.choice(ODD_VALUES))


def _scale_number(rng: random.Random, doc: Any, path: tuple[Any, ...]) -> None:
    parent = _get(doc, path[:-1])
    v = parent[path[-1]]
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        parent[path[-1]] = rng.choice([-1, 0, 10**18, -(10**18), 1e300])
        return
    parent[path[-1]] = rng.choice([-v, v * 10**6, v + 1, v - 1, 0, -(2**31), 2**64, v / 3 if v else 0.1])


def _resize_list(rng: random.Random, doc: Any, path: tuple[Any, ...]) -> None:
    parent = _get(doc, path[:-1])
    v = parent[path[-1]]
    if isinstance(v, list) and v:
        parent[path[-1]] = rng.choice([v[:-1], v + v[-1:], v[: len(v) // 2], [], v[::-1], v * 2])
    elif isinstance(v, str) and v:
        parent[path[-1]] = rng.choice([v[:-1], v + v[-1], v[: len(v) // 2], v.replace("*", "*-"), v + " 0*1",
                                       re.sub(r"\*(\d+)", "*99999999999999999", v, count=1),
                                       re.sub(r"^(\d+)", "70000", v, count=1)])
    else:
        parent[path[-1]] = [v, v]


def _unicode(rng: random.Random, doc: Any, path: tuple[Any, ...]) -> None:
    parent = _get(doc, path[:-1])
    v = parent[path[-1]]
    extra = rng.choice(["ü", "名", "\u202e", "\U0001f600", "\x00", "²", "٣"])  # the last two are digits to isdigit()
    parent[path[-1]] = (v if isinstance(v, str) else str(v)) + extra


_DOC_MUTATORS: list[Callable[[random.Random, Any, tuple[Any, ...]], None]] = [
    _delete, _retype, _scale_number, _resize_list, _unicode,
]


def _swap_from_donor(rng: random.Random, doc: Any, donor: Any) -> None:
    """Replace one top-level entry with the same entry of another model's file ("swapped models")."""
    keys = [key for key in doc if isinstance(donor, dict) and key in donor] if isinstance(doc, dict) else []
    if keys:
        key = rng.choice(keys)
        doc[key] = copy.deepcopy(donor[key])


def mutate_json(rng: random.Random, valid: Any, *, donors: list[Any] | None = None, max_edits: int = 3) -> str:
    """The text of ``valid`` after 1..max_edits structural edits (or a donor swap), as JSON."""
    doc = copy.deepcopy(valid)
    if donors and rng.random() < 0.15:
        _swap_from_donor(rng, doc, rng.choice(donors))
        if rng.random() < 0.5:
            return json.dumps(doc)
    for _ in range(rng.randint(1, max_edits)):
        paths = _paths(doc)
        if not paths:
            break
        # half the edits go to the first levels, where the header fields live
        shallow = [p for p in paths if len(p) <= 2]
        path = rng.choice(shallow if shallow and rng.random() < 0.5 else paths)
        rng.choice(_DOC_MUTATORS)(rng, doc, path)
    return json.dumps(doc)


def mutate_text(rng: random.Random, text: str) -> str:
    """Byte-level damage: truncation, a flipped character, an empty or binary file."""
    choice = rng.randrange(5)
    if choice == 0 and text:
        return text[: rng.randrange(len(text))]
    if choice == 1 and text:
        i = rng.randrange(len(text))
        return text[:i] + rng.choice(["{", "]", '"', "\\", ",", "9", "\ufffd"]) + text[i + 1:]
    if choice == 2:
        return ""
    if choice == 3:
        return "\udcff\udcfe" + text[:50]
    return text + rng.choice(["}", "\n{}", " garbage"])


# -------------------------------------------------------------------------------------------- argument vectors
def mutate_argv(rng: random.Random, argv: list[str], *, values: list[str] | None = None) -> list[str]:
    """``argv`` after 1-2 edits: a value replaced, a token dropped, duplicated, swapped or an unknown one added."""
    out = list(argv)
    pool = (values or []) + ODD_TOKENS
    for _ in range(rng.randint(1, 2)):
        if len(out) <= 1:
            break
        i = rng.randrange(1, len(out))
        op = rng.randrange(6)
        if op <= 1:
            out[i] = rng.choice(pool)
        elif op == 2:
            del out[i]
        elif op == 3:
            out.insert(i, out[i])
        elif op == 4:
            j = rng.randrange(1, len(out))
            out[i], out[j] = out[j], out[i]
        else:
            out.insert(i, rng.choice(["--bogus", "-z", "--k=", "--epsilon=-1", "--seed=-7", "extra"]))
    return out
