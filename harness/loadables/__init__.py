"""NVDLA loadables (compiled networks) as a test input: read by their FlatBuffers slots, run
through NVDLA's own firmware (the user's nvdla/sw ``kmd/firmware``) on any target, checked
against NVDLA's golden dumps and localised layer by layer (README "Loadables")."""
