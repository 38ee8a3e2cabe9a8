"""Calibration: how precisely a model clicks at this display's resolution (docs/calibration.md).

``models.py`` the request and the answer (pure pydantic); ``layout.py`` where the targets go and how
the errors add up (pure); ``service.py`` ``CalibrationService``: the targets page shown, one vision
run per target through the model's own provider, where each click landed read off the page.
"""
