"""Running a trained model: sentence embeddings (encode), fill-mask, the
packed fp32 and int8 CPU copies (fastpath, quantize, int8_kernels) and ONNX export (onnx)."""
