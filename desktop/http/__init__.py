"""The desktop's REST door: the catalogue's routes, generated, and the few written by hand."""
