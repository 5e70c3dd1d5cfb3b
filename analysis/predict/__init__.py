"""`ddlbench predict`: one data-parallel training step at any GPU count, from measured parts (docs/predict.md).

- model.py: the model's terms (its docstring), one rank's Parts and the messages a framework sends;
- network.py: a collective's time on n ranks (commbench, or the system profile's network block);
- cell.py: what a prediction is for and what a calibration run measured; what it did not is refused;
- calibration.py: the calibration it reads (Parts from a run's steps, the loader's pace, loaderbench's rows);
- simulation.py: the step on n GPUs, the table per GPU count, the fit to a study, the validation;
- text.py and figures.py: the tables as text and the figures;
- command.py: the command (its options: ddlbench/predict.py).
"""
