"""Pure converters between a vendor's computer-tool wire format and glassdesk's canonical actions.

One module per vendor. Both the vision loop's providers (``vision.providers``) and the
vendor-native executor endpoints (``vision.vendors.computer``) call these, so an action means the same
thing whether glassdesk's own loop or someone else's drives the desktop. Nothing here touches X,
an SDK or the network.
"""
