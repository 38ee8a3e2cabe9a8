"""Perception: what a screenshot shows, read without a model. No provider, loop or QA code here:
the offline ``ocr`` provider (vision.providers.ocr) and the QA screen finder (vision.qa.screen_find)
both build on it.

    ocr.py        the OCR engine (rapidocr, loaded once per process, on first use) and its results:
                  boxes, lines and words, reading order
    grounding.py  finding a text on the screen from OCR lines (``find_text``)
    fields.py     finding the input field next to a label, from OCR lines and the pixels
    spot.py       what is around a pointer action's pixel with no DOM behind it (a native window, a
                  canvas): the text OCR reads there and a small template image centred on it
"""
