"""The README's supported-layers table, generated from the registry (a test keeps the README in step).

Usage::

    from hgpart.kinds.docs import layers_table
    print(layers_table())
"""

from __future__ import annotations

from hgpart.kinds import CONVERTERS, KINDS, LayerKind

__all__ = ["layers_table", "keras_label"]


def keras_label(key: str) -> str:
    """How a registry class key reads in the docs (``op:Add`` -> ``x + c``)."""
    ops = {"op:Add": "`x + c`", "op:Subtract": "`x - c`", "op:Multiply": "`x * c`", "op:TrueDivide": "`x / c`",
           "op:Divide": "`x / c`"}
    if key in ops:
        return ops[key]
    if "." in key:
        module, cls = key.rsplit(".", 1)
        return f"`{cls}` ({module.rsplit('.', 1)[-1]})"
    return f"`{key}`"


def _row(kind: LayerKind, name: str) -> str:
    labels = list(dict.fromkeys(keras_label(k) for k in kind.keras_classes))
    if kind.doc_label:
        labels.append(kind.doc_label)
    return f"| {', '.join(labels)} | `{name}` | {kind.rule} |"


def layers_table() -> str:
    """One Markdown row per kind: the Keras classes it converts, its name, its communication rule."""
    rows = ["| Keras layer | kind | what crosses devices |", "|---|---|---|"]
    for kind in sorted([*KINDS.values(), *CONVERTERS], key=lambda k: k.name):
        if kind.keras_classes or kind.doc_label:
            rows.append(_row(kind, kind.name if kind.name in KINDS else "(two layers)"))
    return "\n".join(rows)
