"""Pure PyTorch: the transformer, its tokenizers, corpora, trainer and the bundled checkpoints.

Never imports Streamlit. Start reading at transformer.py; config.py lists the switches.
"""
