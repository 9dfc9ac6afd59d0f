"""Vision Transformers (ViT, DINOv2) on the layer kit: `model` (the blocks and the net),
`position_embedding` (resampling a learned embedding to another grid), `vit` (the
registered variants)."""
