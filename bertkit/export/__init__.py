"""Export bertkit models to other runtimes (ONNX: `bertkit.export.onnx`)."""
