"""EfficientNet and EfficientNetV2 on the layer kit, with the official releases' names."""
