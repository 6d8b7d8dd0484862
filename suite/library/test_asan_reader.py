"""The device ASan reader (tilegate/gfx942/asan.py) on a listing written by hand: a call is named
by the address its s_getpc_b64 and adds form, and only the kernels' own code is read."""

from tilegate.gfx942.asan import kernel_names, read_asan

NOTES = """\
amdhsa.kernels:
  - .args:
      - .name:           K.coerce
    .name:           k
    .symbol:         k.kd
  - .kind:           init
    .name:           amdgcn.device.init
    .symbol:         amdgcn.device.init.kd
"""
# k checks one load (shadow, then __asan_report_load4 through s[0:1]), calls it again through the
# same pair, then through a pair overwritten since (not a computed address any more)
LISTING = """\
0000000000001000 <k>:
\tv_add_co_u32_e32 v0, vcc, 0x7fff8000, v0                   // 000000001000: 320000FF 7FFF8000
\ts_getpc_b64 s[0:1]                                         // 000000001008: BE801C00
\ts_add_u32 s0, s0, 0xff4                                    // 00000000100C: 8000FF00 00000FF4
\ts_addc_u32 s1, s1, 0                                       // 000000001014: 8201FF01 00000000
\ts_swappc_b64 s[30:31], s[0:1]                              // 00000000101C: BE9E1E00
\ts_swappc_b64 s[30:31], s[0:1]                              // 000000001020: BE9E1E00
\ts_mov_b32 s0, s4                                           // 000000001024: BE800004
\ts_swappc_b64 s[30:31], s[0:1]                              // 000000001028: BE9E1E00
\ts_endpgm                                                   // 00000000102C: BF810000

0000000000002000 <__asan_report_load4>:
\ts_getpc_b64 s[0:1]                                         // 000000002000: BE801C00
\ts_swappc_b64 s[30:31], s[0:1]                              // 000000002004: BE9E1E00

0000000000003000 <amdgcn.device.init>:
\tv_add_co_u32_e32 v0, vcc, 0x7fff8000, v0                   // 000000003000: 320000FF 7FFF8000
"""


def test_kernels_are_the_metadata_s_less_the_runtime_s_own():
    assert kernel_names(NOTES) == ("k",)


def test_calls_are_named_by_their_computed_address():
    reading = read_asan(LISTING, NOTES)
    assert dict(reading.report_calls) == {"__asan_report_load4": 2}
    assert (reading.shadow_checks, reading.unresolved_calls) == (1, 1)
    assert reading.instrumented


def test_a_listing_without_checks_is_not_instrumented():
    plain = "0000000000001000 <k>:\n\ts_endpgm  // 000000001000: BF810000\n"
    assert not read_asan(plain, NOTES).instrumented
