"""Keras applications' weights for our nets: one mapping per family, proven by logits.

`counterparts` holds the registry (which Keras application equals which of our nets and
how their weights pair up), `transfer` the engine that builds, pairs, copies and checks,
`catalog` the one list of family modules. nets_factory does not import this package, so
only the import job loads keras.applications.
"""
