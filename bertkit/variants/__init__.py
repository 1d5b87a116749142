"""Model variants as switches on the one encoder (see `BertConfig`).

Each module here holds the code of one switch that is more than a few lines; `model.py` and
`heads.py` call into it, so the spine stays readable:

- `relative.py`  relative position scores (`position_embedding_type="relative_key[_query]"`)
- `keymaps.py`   Hugging Face key names of RoBERTa, ALBERT and ELECTRA checkpoints
"""
