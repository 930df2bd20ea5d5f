"""Independent truths for mjsysid's bench: simulators written from documents, not from mjsysid.

Nothing here imports mjsysid. See ``bench/README.md`` ("Independent truths").
"""
