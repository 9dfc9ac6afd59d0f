"""MobileNetV4 on the layer kit: blocks, the network, the variants."""
