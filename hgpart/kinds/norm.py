"""LayerNormalization over the channel axis: a reduction over channels, so statistics cross devices.

Output channel ``j`` needs input channel ``j`` and the mean and variance of every pixel over *all* channels.
Each part owning some channels sums its channels' values and squares per pixel, sends those two maps to the
root part (the one owning channel 0), which returns the mean and the reciprocal deviation (two maps): four
maps of ``B * H * W`` values per extra part. The hypergraph carries this as one *statistics net* over all of
the layer's vertices, cost ``4 * B * H * W * d``, so its ``cost * (lambda - 1)`` is exactly those bytes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hgpart.kinds import tfops
from hgpart.kinds.base import Converted, KerasCall, LayerKind, LayerLike, Role, spatial
from hgpart.kinds.channelwise import channel_axis_only

__all__ = ["LayerNorm"]


class LayerNorm(LayerKind):
    name = "layer_norm"
    role = Role.VERTEX
    piecewise = False  # the statistics of a position are reduced over every part's channels
    keras_classes = ("LayerNormalization",)
    weights = ("gamma", "beta")
    stats_maps = 4
    rule = ("channel j reads channel j; per-pixel partial sums (2 maps) go to the part of channel 0, mean and "
            "deviation (2 maps) come back: 4 maps per extra part")

    def convert(self, call: KerasCall) -> list[Converted]:
        cfg = call.cfg
        channel_axis_only(call, cfg.get("axis", -1))
        if cfg.get("rms_scaling"):
            raise call.refuse("rms_scaling=True", fix="use rms_scaling=False")
        config = {"keras_name": call.name, "epsilon": float(cfg["epsilon"]), "center": bool(cfg["center"]),
                  "scale": bool(cfg["scale"])}
        # per element: subtract the mean, square, two sums, scale by 1/sd, gamma, beta
        return [Converted(self.name, config, 7 * call.n_out)]

    def read_map(self, layer: LayerLike) -> np.ndarray | None:
        return np.arange(layer.out_channels)

    def stats_cost(self, layer: LayerLike) -> int:
        """Values per sample of the statistics maps that cross per extra part."""
        return self.stats_maps * spatial(layer.output_shape)

    def make_variables(self, rt: Any, layer: LayerLike, w: dict[str, np.ndarray]) -> None:
        for q, idx in rt.layout[layer.name].items():
            for name in self.weights:
                if name in w:
                    rt.add_variable(layer, q, name, w[name][idx], (idx,))

    def forward(self, rt: Any, layer: LayerLike, x: Any, vals: dict[str, Any], views: dict, training: bool,
                bn_stats: list | None, scope: str) -> dict[int, Any]:
        import tensorflow as tf

        lay = rt.layout[layer.name]
        mine, sums = {}, {}
        for p, jp in lay.items():
            view = rt.view(vals, views, layer.inputs[0], p)
            pos = rt.pos_in_view(layer.inputs[0], p, jp)
            with tf.device(rt.devices[p]):
                mine[p] = tfops.take_channels(view, pos)
                sums[p] = tf.concat([tf.reduce_sum(mine[p], -1, keepdims=True),
                                     tf.reduce_sum(tf.square(mine[p]), -1, keepdims=True)], axis=-1)
        root = int(rt.filters(layer)[0])  # the root of its statistics net: the part of channel 0
        with tf.device(rt.devices[root]):
            total = tf.add_n(list(sums.values())) / float(layer.out_channels)
            mean = total[..., :1]
            var = tf.maximum(total[..., 1:] - tf.square(mean), 0.0)
            stats = tf.concat([mean, tf.math.rsqrt(var + float(layer.config["epsilon"]))], axis=-1)
        out = {}
        for p, y in mine.items():
            with tf.device(rt.devices[p]):
                z = (y - stats[..., :1]) * stats[..., 1:]
                gamma, beta = rt.var(layer.name, "gamma", p), rt.var(layer.name, "beta", p)
                out[p] = (z * gamma if gamma is not None else z) + (beta if beta is not None else 0.0)
        return out
