"""The note DALI's GPU pipeline gives when CUDA has too few hardware work queues (no DALI needed)."""
import pytest

from benchmarks.loaders.dali import WANTED_HW_QUEUES, hardware_queue_note


@pytest.mark.parametrize("environ", [{}, {"CUDA_DEVICE_MAX_CONNECTIONS": "8"}, {"CUDA_DEVICE_MAX_CONNECTIONS": "1"},
                                     {"CUDA_DEVICE_MAX_CONNECTIONS": "many"}])
def test_too_few_queues_get_a_note_naming_the_value_and_the_fix(environ):
    note = hardware_queue_note(environ)
    assert note is not None and "\n" not in note
    assert f"CUDA_DEVICE_MAX_CONNECTIONS={environ.get('CUDA_DEVICE_MAX_CONNECTIONS', '8')} " in note
    assert f"+system.env.CUDA_DEVICE_MAX_CONNECTIONS={WANTED_HW_QUEUES}" in note


@pytest.mark.parametrize("value", ["32", "64"])
def test_enough_queues_are_quiet(value):
    assert hardware_queue_note({"CUDA_DEVICE_MAX_CONNECTIONS": value}) is None


def test_the_gpu_system_configs_ask_for_enough_queues():
    from benchmarks.config import compose

    for system in ("h200", "generic_8gpu", "juwels_booster"):
        env = compose([f"system={system}"]).system.env
        assert hardware_queue_note({k: str(v) for k, v in env.items()}) is None, system
