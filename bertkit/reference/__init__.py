"""From-scratch references to read beside the PyTorch code (see numpy_bert.py)."""
