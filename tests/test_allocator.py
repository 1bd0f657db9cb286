"""hgpart's CPU allocator default (:mod:`hgpart.allocator`): BFC unless the user chose, the cap never below
TensorFlow's own; and the command line sets it before any command runs."""

from __future__ import annotations

import os
import subprocess
import sys

from hgpart import allocator


def test_bfc_is_the_default_and_a_users_choice_is_kept(monkeypatch):
    monkeypatch.setattr(allocator, "_machine_mb", lambda: 24_000)
    env: dict[str, str] = {}
    assert allocator.bfc_environment(env) is env
    assert env == {"TF_CPU_ALLOCATOR_USE_BFC": "true"}  # 24 GB: TensorFlow's 64 GiB cap already covers it
    env = {"TF_CPU_ALLOCATOR_USE_BFC": "false"}
    assert allocator.bfc_environment(env) == {"TF_CPU_ALLOCATOR_USE_BFC": "false"}  # no cap for an unused pool


def test_the_cap_rises_to_a_big_machines_memory_but_a_users_cap_is_kept(monkeypatch):
    monkeypatch.setattr(allocator, "_machine_mb", lambda: 3 * 2**16)
    assert allocator.bfc_environment({})["TF_CPU_BFC_MEM_LIMIT_IN_MB"] == str(3 * 2**16)
    env = allocator.bfc_environment({"TF_CPU_BFC_MEM_LIMIT_IN_MB": "1024"})
    assert env == {"TF_CPU_ALLOCATOR_USE_BFC": "true", "TF_CPU_BFC_MEM_LIMIT_IN_MB": "1024"}
    monkeypatch.setattr(allocator, "_machine_mb", lambda: None)
    assert "TF_CPU_BFC_MEM_LIMIT_IN_MB" not in allocator.bfc_environment({})


def test_the_command_line_turns_it_on_before_a_command_runs():
    code = ("import os, sys\n"
            "from hgpart import cli\n"
            "try:\n"
            "    cli.main(['--help'])\n"
            "except SystemExit:\n"
            "    pass\n"
            "print('BFC=' + os.environ.get('TF_CPU_ALLOCATOR_USE_BFC', '-'), file=sys.stderr)\n")
    env = {k: v for k, v in os.environ.items() if k != "TF_CPU_ALLOCATOR_USE_BFC"}
    got = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert "BFC=true" in got.stderr
    env["TF_CPU_ALLOCATOR_USE_BFC"] = "false"
    got = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert "BFC=false" in got.stderr
