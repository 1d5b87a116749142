"""The encoder families: configs, the BERT encoder and its switches (variants/), heads, attention,
each other family in its own folder (family.py describes an entry, families.py lists them), the
decoder side (lm_head, encoder_decoder, generation, kv_cache), and loading/saving checkpoints in
transformers' layout (checkpoint, hf_compat, sentence_layout)."""
