"""What gpunode knows about the released software, and how it learns more.

The rules and the derived data are files under gpunode/compat/ (read by gpunode.resolve); the
judge (gpunode/judge/) runs each pin set's own sglang on plans. This package makes and checks
what those files hold from the released artifacts:

    releases.py       PyPI's releases of the pinned packages and one release's own requirements
    proposal.py       a proposed pin set for a new sglang, from its own Requires-Dist
    refresh.py        the PyPI half of `inv kb.refresh`: what is new, the proposal written and locked
    pinlocks.py       full locks of the pin sets and routers (uv pip compile -> pylock.toml)
    wheelregistry.py  compat/derived/sglang-registry.yml, read from the released sglang wheels
    kernelsms.py      compat/kernel_sms.yml: the SASS and PTX of the pinned kernel wheels
    fatbin.py         the reader of a native library's .nv_fatbin section
"""
