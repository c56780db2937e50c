"""What goes into a model and comes out of it: files, images and arrays as inputs
(`inputs.py`, `files.py`, `preprocess.py`), what outputs mean (`postprocess.py`: class scores,
YOLO rows), and what is written (`draw.py`, `trace.py`, `jsonout.py`, `dot.py`); and where a
model comes from: a PyTorch module exported with pnnx and checked (`export.py`)."""
