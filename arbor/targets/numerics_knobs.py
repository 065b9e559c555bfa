"""Which serving knobs can change the generated tokens, declared or not.

The accuracy gate (greedy tokens and log-probabilities vs the baseline) runs for a candidate
that changes an output-changing knob. A campaign file marks those with ``changes_outputs: true``,
but a user who forgets it on ``kv_cache_dtype: fp8`` would get a faster server with different
answers accepted on speed alone. Knobs whose names say they change numerics (dtypes, quantization,
speculative decoding) therefore always count, whatever the file says.
"""

from __future__ import annotations

import re

NUMERIC_NAMES = re.compile(
    r"dtype|precision|quant|fp8|fp4|int8|int4|awq|gptq|speculat|spec_decod|draft|num_speculative|"
    r"kv_cache_type|cache_dtype", re.IGNORECASE)


def changes_outputs(name: str, knob) -> bool:  # type: ignore[no-untyped-def]
    """Declared ``changes_outputs``, or a name that says the knob changes numerics."""
    return bool(getattr(knob, "changes_outputs", False)) or bool(NUMERIC_NAMES.search(name))
