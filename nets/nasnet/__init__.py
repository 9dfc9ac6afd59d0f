"""NASNet-A and PNASNet-5 (TF-Slim's nets/nasnet): cells as data in `cells`, the network
they share in `cell_network`, the nets in `nasnet` and `pnasnet`."""
