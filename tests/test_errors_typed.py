"""Errors typed by cause (hgpart.errors): callers catch a type, never parse message text."""

from __future__ import annotations

import pickle

import pytest

from hgpart.errors import (
    BadFileError,
    BadOptionError,
    DeviceError,
    HgpartError,
    InterruptedRunError,
    MissingProfileError,
    ModelMismatchError,
)


@pytest.mark.parametrize("exc", [
    BadOptionError("K = 0 must be >= 1", where="--k", option="--k", value=0),
    BadFileError("not a placement", where="a.json", fix="re-run", path="a.json"),
    MissingProfileError("absent", path="p.json", model="minivgg", batch_size=32),
    ModelMismatchError("another model", expected="abc", found="def"),
    DeviceError("worker 1 died", device="/job:worker/task:1", cause="OSError"),
    InterruptedRunError("stopped", completed=3),
])
def test_every_cause_is_an_hgpart_error_and_survives_a_process_hop(exc: HgpartError) -> None:
    assert isinstance(exc, HgpartError)  # every existing `except HgpartError` still catches it
    back = pickle.loads(pickle.dumps(exc))  # worker processes and subprocess tests pass errors by pickle
    assert type(back) is type(exc) and back.line() == exc.line() and vars(back) == vars(exc)


def test_the_values_are_carried_not_only_printed() -> None:
    e = BadOptionError("bad", where="--epsilon", value=-1.0)
    assert e.option == "--epsilon" and e.value == -1.0 and e.line() == "bad in --epsilon"
    m = MissingProfileError("x", path="profiles/a.json", model="a", batch_size=16)
    assert isinstance(m, BadFileError) and (m.path, m.model, m.batch_size) == ("profiles/a.json", "a", 16)


def test_load_inputs_raises_missing_profile_with_its_path_and_model() -> None:
    from hgpart.commands.partition_cmds import load_inputs

    with pytest.raises(MissingProfileError) as info:  # no committed minivgg profile at 16x16x3
        load_inputs("minivgg", "16", None, None, False, 32)
    assert info.value.model == "minivgg" and info.value.batch_size == 32
    assert info.value.path is not None and info.value.path.endswith(".json")


class _Reached(Exception):
    pass


def _quickstart_until_inputs(monkeypatch: pytest.MonkeyPatch, first_error: Exception) -> list[bool]:
    """Run quickstart up to its second load_inputs call; the devices are a stub, so no TensorFlow cluster opens."""
    import hgpart.runtime.devices as devices

    import hgpart.commands.partition_cmds as pc
    from hgpart.commands.quickstart_cmds import quickstart

    calls: list[bool] = []

    class _Stub:
        def close(self) -> None:
            pass

    def fake_inputs(model: str, input: str, profile: object, classes: object, analytic: bool,
                    batch: int) -> object:
        calls.append(analytic)
        if not analytic:
            raise first_error
        raise _Reached

    monkeypatch.setattr(devices, "open_devices", lambda *a, **k: _Stub())
    monkeypatch.setattr(pc, "load_inputs", fake_inputs)
    with pytest.raises((_Reached, HgpartError)):
        quickstart(model="minivgg", input="32", k=2, grain="coarse", steps=1, mode="async", out=None)  # type: ignore[arg-type]
    return calls


def test_quickstart_falls_back_to_flop_counts_on_the_cause_whatever_the_message(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the message says nothing about "no profile": only the type tells quickstart to fall back
    calls = _quickstart_until_inputs(monkeypatch, MissingProfileError("profile file absent", path="x.json"))
    assert calls == [False, True]


def test_quickstart_does_not_swallow_other_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    # a malformed profile whose message happens to say "no profile" is not a missing one
    calls = _quickstart_until_inputs(monkeypatch, BadFileError("no profile fields in x.json", path="x.json"))
    assert calls == [False]
