"""MobileNet V2, V3 and EdgeTPU: one conv-defs-driven builder (`mobilenet`), its blocks
(`conv_blocks`) and the published architectures as data (`mobilenet_v2`, `mobilenet_v3`)."""
