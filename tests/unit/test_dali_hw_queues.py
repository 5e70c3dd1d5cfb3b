"""The note DALI's GPU pipeline gives when CUDA has too few hardware work queues (no DALI needed)."""

import pytest

from benchmarks.loaders.dali import MIN_NUM_HW_QUEUES, hardware_queue_note


@pytest.mark.parametrize("value", ["8", "1", "many"])
def test_too_few_queues_get_a_note_naming_the_value_and_an_override_hydra_takes(value):
    note = hardware_queue_note({"CUDA_DEVICE_MAX_CONNECTIONS": value})
    assert note is not None and "\n" not in note
    assert f"CUDA_DEVICE_MAX_CONNECTIONS={value}:" in note
    # the system config has the key (that is how it got this value): no leading '+'
    assert f"pass system.env.CUDA_DEVICE_MAX_CONNECTIONS={MIN_NUM_HW_QUEUES}," in note


def test_an_unset_variable_gets_the_override_that_adds_it():
    note = hardware_queue_note({})
    assert note is not None and "=8 (unset)" in note
    assert f"pass +system.env.CUDA_DEVICE_MAX_CONNECTIONS={MIN_NUM_HW_QUEUES}," in note


@pytest.mark.parametrize("system", ["h200", "local_cpu"])
def test_the_suggested_override_composes(system):
    from benchmarks.config import compose

    env = {k: str(v) for k, v in compose([f"system={system}"]).system.env.items()}
    if system == "h200":
        env["CUDA_DEVICE_MAX_CONNECTIONS"] = "8"
    note = hardware_queue_note(env)
    override = note.split("pass ", 1)[1].split(",", 1)[0]
    cfg = compose([f"system={system}", override])
    assert cfg.system.env["CUDA_DEVICE_MAX_CONNECTIONS"] == str(MIN_NUM_HW_QUEUES)


@pytest.mark.parametrize("value", ["32", "64"])
def test_enough_queues_are_quiet(value):
    assert hardware_queue_note({"CUDA_DEVICE_MAX_CONNECTIONS": value}) is None


def test_the_gpu_system_configs_ask_for_enough_queues():
    from benchmarks.config import compose

    for system in ("h200", "generic_8gpu", "juwels_booster"):
        env = compose([f"system={system}"]).system.env
        assert hardware_queue_note({k: str(v) for k, v in env.items()}) is None, system


def test_meta_json_records_the_number_of_queues(monkeypatch):
    """It changes every GPU run, not only DALI's: the run's provenance keeps it."""
    from benchmarks.runlog import environment_provenance

    monkeypatch.setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32")
    assert environment_provenance()["CUDA_DEVICE_MAX_CONNECTIONS"] == "32"
