"""The encoder family: configs, the BERT encoder and its switches (variants/), heads, attention,
the modern encoder (modern/), the decoder side (lm_head, encoder_decoder, generation, kv_cache),
and loading/saving checkpoints in transformers' layout (checkpoint, hf_compat, sentence_layout)."""
