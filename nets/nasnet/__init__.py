"""NASNet-A and PNASNet-5 (TF-Slim's nets/nasnet): cells as data in `cells`, the nets in
`nasnet` and `pnasnet`."""
