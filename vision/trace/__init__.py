"""The trace: the on-disk evidence of what a run saw and did.

Layout under the data directory (``GLASSDESK_DATA_DIR``, else ``./data``)::

    traces/<trace_id>/meta.json            the run: instruction, model, status, totals, chain head
    traces/<trace_id>/steps.jsonl          one StepRecord per line, append-only
    traces/<trace_id>/step-0001-before.png the observation the model was shown
    traces/<trace_id>/step-0001-after.png  the settled screen after the step's actions
    traces/<trace_id>/owner.json           while the run is unfinished: the process writing it
    traces/<trace_id>/video.mp4, chapters.vtt, captions.vtt   a filmed run's video receipt
    traces/<trace_id>/video.json           their SHA-256, chained after the last step (meta's video_hash)
    traces/<trace_id>/seal.json            once finished: meta.json's SHA-256, chained after the last link

Every file is written atomically (temp file, fsync, rename), so a reader, or a process restarted
after a crash, sees either the old or the new version of a file, never a torn one. Each PNG's
SHA-256 is in its step record; each record carries the hash of the previous record and its own
hash over its canonical JSON, so editing, removing or reordering records breaks the chain, and
meta.json keeps the chain head so truncating the tail is caught too. When the run ends, meta.json
(status, answer, instruction, model) is sealed after the chain's last link, and from then on a file
in the directory that nothing in the chain names fails verify as well (but a write in progress, a
dot-file, and report.html, the offline viewer rendered from the trace). ``verify`` checks all of it.

Writing is off the run's hot path, on one trace-writing thread (writer.py); a run whose server
died is closed as ``interrupted`` when the next server starts (``TraceStore.close_interrupted``,
store.py). Their modules' docstrings say how.

Nothing secret is written: record content passes through ``redact`` (known secret strings, key-like
tokens, credential-named keys, inline base64 images) before it is hashed and stored.

The package, by concern (import from the module itself; this file re-exports nothing)::

    records.py   what is written: the models (StepRecord, TraceMeta, Trace, VerifyResult, Usage,
                 RunStatus, ...), ``redact``, and the canonical JSON and record hash of the chain;
                 pydantic and the standard library only: the client imports the models without
                 the desktop (Xlib, mss) or the server (fastapi)
    files.py     atomic writes, trace ids, the owner file's name
    writer.py    TraceWriter and the one trace-writing thread
    store.py     TraceStore: create, list, load, verify, close_interrupted
"""
