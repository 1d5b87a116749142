"""Model variants as switches on the one encoder (see `BertConfig`).

Each module here holds the code of one switch that is more than a few lines, and its
`validate(config)`; `encoder.py` and `heads.py` call into it, so the spine stays readable:

- `switches.py`  the table of switches (`SWITCHES`): each one's validation, and what the encoder and
                 the trainer ask of it; `register_switch` adds one from a user's module
- `roberta.py`   RoBERTa's position numbering from pad_token_id + 1 (its check)

- `relative.py`  relative position scores (`position_embedding_type="relative_key[_query]"`)
- `sinusoidal.py` the original Transformer's fixed position table (`position_embedding_type="sinusoidal"`)
- `t5_bias.py`   T5's scalar relative bias, bucketed and shared by all layers (`position_embedding_type="t5_bias"`)
- `keymaps.py`   Hugging Face key names of RoBERTa, ALBERT, ELECTRA and DeBERTa-v2 checkpoints,
                 and the warning for position types transformers 5 cannot run
- `albert.py`    factorised embeddings (`embedding_size`) and shared layers (`num_hidden_groups`)
- `electra.py`   replaced-token detection: `ElectraForPreTraining`, `ElectraPretrainer`
- `moe.py`       mixture-of-experts feed-forward (`num_experts`, `moe_top_k`, ...)
- `sparse.py`    block-sparse local attention (`attention_block_size`, ...)
- `deberta.py`   disentangled attention (`relative_attention`, `pos_att_type`, ...)
"""
