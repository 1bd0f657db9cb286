"""Comparison mode: every partitioning method of the thesis on one table.

Usage::

    from hgpart.compare.static import run_static
    results = run_static(graph, profile, ks=[2, 4, 8], methods=["layerwise", "hypergraph"])

Modules: :mod:`~hgpart.compare.thesis` (the thesis's published VGG16 numbers),
:mod:`~hgpart.compare.dataparallel` (data-parallel communication and memory),
:mod:`~hgpart.compare.static` (the method x grain x N x epsilon grid),
:mod:`~hgpart.compare.report` (tables, CSV/JSON/Markdown, plots),
:mod:`~hgpart.compare.measured` (train every strategy on the same devices; the
one compiler module that drives the runtime) and
:mod:`~hgpart.compare.measured_report` (its tables, curves and files).
"""
